#!/usr/bin/env bash
# The reader and evaluator on a GPU, measured (bench/gpu_serving.py): the one prepared script a
# lent GPU machine runs, from the repository root, once deploy/gpu/carry.py's parts are in
# /tmp there (deploy/gpu/README.md has the calls, in order).
#
#   bash deploy/gpu/check.sh --device cuda --parts /tmp/answerbox-gpu [-- BENCH OPTIONS]
#   bash deploy/gpu/check.sh --device cpu [-- BENCH OPTIONS]     # here, with the project venv, small sizes
#   bash deploy/gpu/check.sh --parts DIR --install-only           # carry.py --dry-run: join, check, install, stop
#
# With --parts it checks every part against SHA256SUMS, joins them, checks the bundle, unpacks
# it and installs its wheels with pip --no-index into DIR/site (once: a rerun on the same
# machine reuses it), which goes first on PYTHONPATH, ahead of the image's CPU onnxruntime.
# On cuda, LD_LIBRARY_PATH gets the CUDA libraries of the image's nvidia-* wheels (onnxruntime-gpu
# 1.31 is built for CUDA 13 and cuDNN 9; PyTorch's wheels bring them), for the bench and for the
# answerbox server it starts. The report is written to $OUT/gpu_serving.json where $OUT is set
# (the device tool's output folder), with the whole log beside it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

device=cuda parts="" install_only=""
while [ $# -gt 0 ]; do
  case $1 in
    --device) device=$2; shift 2 ;;
    --parts) parts=$2; shift 2 ;;
    --install-only) install_only=1; shift ;;
    --) shift; break ;;
    *) echo "check.sh: unknown option $1 (bench options go after --)" >&2; exit 64 ;;
  esac
done
venv=${ANSWERBOX_VENV:-$HOME/.cache/answerbox/venv}
if [ -z "${PYTHON:-}" ]; then
  # Here the project venv has everything; there the image's python3 gets the carried wheels.
  if [ -z "$parts" ] && [ -x "$venv/bin/python" ]; then PYTHON=$venv/bin/python; else PYTHON=python3; fi
fi
site="" bench_args=()
if [ -n "$parts" ]; then
  started=$SECONDS
  sums=$parts/SHA256SUMS
  listed=$(grep -c ' part-' "$sums")
  present=$(find "$parts" -maxdepth 1 -name 'part-*' | wc -l)
  if [ "$present" -ne "$listed" ]; then
    # A machine that went back between calls lost /tmp: the calls must start again from the first.
    echo "check.sh: $present of $listed parts in $parts; send the missing ones (deploy/gpu/README.md)" >&2
    exit 3
  fi
  site=$parts/site
  bundle_sum=$(grep ' bundle.tar.xz$' "$sums" | cut -d' ' -f1)
  if [ "$(cat "$site/.bundle" 2>/dev/null)" != "$bundle_sum" ]; then
    (cd "$parts" && grep ' part-' SHA256SUMS | sha256sum -c --strict --quiet)
    find "$parts" -maxdepth 1 -name 'part-*' | sort | xargs cat >"$parts/bundle.tar.xz"
    (cd "$parts" && grep ' bundle.tar.xz$' SHA256SUMS | sha256sum -c --strict)
    rm -rf "$parts/unpacked" "$site"
    "$PYTHON" -m tarfile --filter data -e "$parts/bundle.tar.xz" "$parts/unpacked"
    rm "$parts/bundle.tar.xz"
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$parts"/unpacked/wheels/*.whl
    echo "$bundle_sum" >"$site/.bundle"
  fi
  echo "check.sh: $(ls "$parts"/unpacked/wheels | wc -l) wheels installed in $site ($((SECONDS - started)) s)"
  if [ -f "$parts/unpacked/data/squaddev_v1.1.json.gz" ]; then bench_args+=(--squad "$parts/unpacked/data"); fi
fi
[ -n "$install_only" ] && exit 0

export PYTHONPATH="plugin:.${site:+:$site}" HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
if [ "$device" = cuda ]; then
  nvidia-smi -L || true
  libs=$("$PYTHON" -c '
import glob, os, site
dirs = {os.path.dirname(p) for root in site.getsitepackages() for p in glob.glob(os.path.join(root, "nvidia", "**", "lib*.so*"), recursive=True)}
print(":".join(sorted(dirs)))')
  export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  # Small enough for 2 cores in under two minutes; options given after -- override these.
  bench_args+=(--pairs 30 --questions 20 --batches 1,16,64 --seconds 0.5)
fi
out=${OUT:-$(mktemp -d)}
echo "check.sh: $("$PYTHON" --version), report in $out/gpu_serving.json"
"$PYTHON" -m bench.gpu_serving --device "$device" --out "$out/gpu_serving.json" "${bench_args[@]}" "$@" 2>&1 | tee "$out/check.log"
