#!/usr/bin/env bash
# README command 1: install what is missing, then start the embedded default and ask it one question.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV=$(bash "$ROOT/deploy/local/setup.sh" demo | tail -n 1)
exec "$VENV/bin/answerbox" demo "$@"
