#!/usr/bin/env bash
# The CPU-dependent tests (ONNX Runtime's int8 kernels by default) on the code paths of an
# AVX2-only CPU, on any x86-64 machine: qemu's user-mode emulator runs the Python process
# as a Haswell, which has AVX2 and FMA but neither AVX-512 nor VNNI, so ONNX Runtime, torch
# and numpy pick the kernels such a machine runs. About 20x slower than native: pass only
# the tests that compare numbers (default tests/models). llama.cpp is built for the build
# machine's CPU and cannot run there; the real-LLM tests assert no wording anyway.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV=$(bash "$ROOT/deploy/local/setup.sh" test | tail -n 1)
if ! command -v qemu-x86_64 >/dev/null; then
  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user >&2
fi
cd "$ROOT"
# qemu warns once per CPU feature it cannot emulate: noise, not findings.
qemu-x86_64 -cpu Haswell "$VENV/bin/python" -m pytest -p no:cacheprovider "${@:-tests/models}" \
  2> >(grep -v "TCG doesn't support requested feature" >&2)
