#!/usr/bin/env bash
# README command 2 (and CI): install what is missing, start the real local LLM for the tests
# marked real_llm, and run the whole test suite against osmem-server.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV=$(bash "$ROOT/deploy/local/setup.sh" | tail -n 1)
cd "$ROOT"
LLM_PORT=${ANSWERBOX_TEST_LLM_PORT:-18081}
"$VENV/bin/answerbox" local-llm --port "$LLM_PORT" >/tmp/answerbox-test-llm.log 2>&1 &
LLM_PID=$!
trap 'kill $LLM_PID 2>/dev/null || true' EXIT
for _ in $(seq 1 240); do
  curl -sf "http://127.0.0.1:$LLM_PORT/v1/models" >/dev/null && break
  kill -0 $LLM_PID 2>/dev/null || { cat /tmp/answerbox-test-llm.log; exit 1; }
  sleep 0.5
done
export ANSWERBOX_TEST_LLM_URL="http://127.0.0.1:$LLM_PORT/v1"
"$VENV/bin/python" -m pytest "$@"
