#!/usr/bin/env bash
# README command 2 (and CI): install what is missing, start the real local LLM for the tests
# marked real_llm, check lint (ruff) and types (mypy --strict on the package), and run the
# whole test suite: both layers, tests/unit in-process and the rest against osmem-server.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV=$(bash "$ROOT/deploy/local/setup.sh" test | tail -n 1)
cd "$ROOT"
LLM_PORT=${ANSWERBOX_TEST_LLM_PORT:-18081}
LLM_LOG=$(mktemp -t answerbox-test-llm.XXXXXX)
# A session of its own: the server and everything it starts form one process group, which
# the trap stops whole (TERM, then KILL after a grace period).
setsid "$VENV/bin/answerbox" local-llm --port "$LLM_PORT" >"$LLM_LOG" 2>&1 &
LLM_PGID=$!
stop_llm() {
  kill -TERM -- "-$LLM_PGID" 2>/dev/null || return 0
  for _ in $(seq 1 40); do
    kill -0 -- "-$LLM_PGID" 2>/dev/null || return 0
    sleep 0.25
  done
  kill -KILL -- "-$LLM_PGID" 2>/dev/null || true
}
trap stop_llm EXIT
# Wait for the line our own server prints once it answers: a stale server on the port makes
# local-llm fail instead (it checks the port is free), never a passing health check.
until grep -q "at http://127.0.0.1:$LLM_PORT/v1" "$LLM_LOG"; do
  kill -0 "$LLM_PGID" 2>/dev/null || { cat "$LLM_LOG"; exit 1; }
  sleep 0.5
done
export ANSWERBOX_TEST_LLM_URL="http://127.0.0.1:$LLM_PORT/v1"
# Lint and types first (seconds); their configuration is in pyproject.toml.
"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check .
"$VENV/bin/mypy"
"$VENV/bin/python" -m pytest "$@"
