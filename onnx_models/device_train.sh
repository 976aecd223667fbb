#!/usr/bin/env bash
# Trains on a lent GPU (the `device` tool's run), from the repository root, going on from the
# model the tree ships (onnx_models/default), or from .gpu/start when it holds float16 shards.
# What it needs beside the tree, prepared here in a folder git ignores
# (.gitignore lists /.gpu/), 5 MB in all (the verifier's pairs 4 MB more):
#   python -m onnx_models.train.travel base .gpu/base    # config, tokenizer, parameter names
#   python -m onnx_models.train.travel data .gpu/data    # the training files, gzipped
#   # what answerbox imports that the GPU image lacks, as wheels for its Python 3.12:
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d .gpu/wheels \
#     pydantic==2.14.4 pydantic-core==2.50.5 pydantic-settings==2.16.3 annotated-types==0.8.0 \
#     typing-inspection==0.4.5 python-dotenv==1.2.4 Events==0.5 opensearch-py==3.2.0 openai==3.57.0 \
#     httpx2==2.16.2 sniffio==1.3.1
#   (onnx_models.data.squad imports answerbox.processors, whose package imports the clients)
# A reader that never saw the held-out articles (the shipped one saw every article in its first
# epochs, so the fits on "held-out" articles read it where it has learned the answers) starts
# from the base encoder instead, 44 MB more (the last call's $OUT/trained shards, put in
# .gpu/start, go on from there in the next call). The tree (47 MB) and .gpu (52 MB) are then
# over the 64 MiB a call takes: the run does not read the tree's graphs, so for that call take
# them out of git's index (and ignore them), then put them back:
#   python -m onnx_models.train.travel start .gpu/start
#   git rm -q --cached onnx_models/default/model.{int8,fp32.packed}.onnx
#   printf '/onnx_models/default/model.%s.onnx\n' int8 fp32.packed >> .git/info/exclude
#   # the device run, carry [".gpu"] (4 epochs of 6 seeds: 8 min of the call, 22 steps/s each):
#   SEEDS="41 42 43 44 45 46" bash onnx_models/device_train.sh --lr 1e-4 --epochs 4 --hard-negatives-from 4 \
#     --holdout 0.1 --bf16 --max-minutes 6.5
#   git reset -q HEAD onnx_models/default   # then drop the two lines from .git/info/exclude
# Then run, with carry [".gpu"], e.g.:
#   bash onnx_models/device_train.sh --lr 3e-5 --epochs 3 --train-embeddings --holdout 0.1 --keep-weights
# The claim verifier trains the same way with TRAINER=verifier, from the shipped reader's encoder
# (what `checkpoint` rebuilds) on its training pairs, prepared here (4 MB):
#   python -m onnx_models.train.travel pairs .gpu/pairs
#   # the device run, carry [".gpu"]:
#   TRAINER=verifier SEEDS="41 42 43" bash onnx_models/device_train.sh --vitaminc 100000 --contrastive 100000 \
#     --epochs 2 --batch 32 --lr 5e-5 --bf16 --max-minutes 7
#   # here: unshard as below (--tokenizer .gpu/base), then `answerbox models export CKPT DIR --task
#   # text-classification --variants int8 --max-length 128 --stride 0` and onnx_models.evaluate.verifier.
# A faster reader (issue 61): STUDENT="0 1 2" keeps those encoder layers of the start
# (onnx_models.train.student) and distils the rest from it (reader --teacher), e.g.
#   STUDENT="0 1 2" SEEDS="41 42 43 44" bash onnx_models/device_train.sh --lr 1e-4 --epochs 4 \
#     --hard-negatives-from 4 --holdout 0.1 --bf16 --train-embeddings --max-minutes 6.5
# then unshard, export and recalibrate as the shipped model was (onnx_models/README.md).
# The arguments go to onnx_models.train.reader (after --device cuda), or onnx_models.train.verifier.
# SEEDS="41 42 43" trains one run per seed at once (one run of this small model leaves the GPU
# mostly idle) and brings back the mean of their weights: runs from one start share a basin, so
# their mean is a model soup (onnx_models.train.average). The trained weights come back as float16 shards with config.json and
# the runs' train.log under $OUT/trained; here `python -m onnx_models.train.travel unshard` makes
# them a checkpoint again.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
site=$(mktemp -d)
if compgen -G ".gpu/wheels/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$site" .gpu/wheels/*.whl
fi
export PYTHONPATH="plugin:.:$site" HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
work=$(mktemp -d)
if compgen -G ".gpu/start/weights-*.npz" >/dev/null; then
  python3 -m onnx_models.train.travel unshard .gpu/start "$work/base" --tokenizer .gpu/base
else
  python3 -m onnx_models.train.travel checkpoint .gpu/base "$work/base"
fi
teacher=()
if [ -n "${STUDENT:-}" ]; then
  # A student of those layers, distilled from the model it was cut from: built here, nothing to carry.
  mv "$work/base" "$work/teacher"
  read -ra layers <<<"$STUDENT"
  python3 -m onnx_models.train.student "$work/teacher" "$work/base" --keep-layers "${layers[@]}"
  teacher=(--teacher "$work/teacher")
fi
case "${TRAINER:-reader}" in
  reader) trainer=(onnx_models.train.reader --encoder "$work/base" --data .gpu/data "${teacher[@]}") ;;
  verifier) trainer=(onnx_models.train.verifier --base "$work/base" --pairs .gpu/pairs/verifier_pairs.jsonl.gz) ;;
  *) echo "TRAINER is reader or verifier, not $TRAINER" >&2; exit 2 ;;
esac
read -ra seeds <<<"${SEEDS:-13}"
runs=() pids=()
for seed in "${seeds[@]}"; do
  runs+=("$work/run-$seed")
  python3 -m "${trainer[@]}" --device cuda --init "$work/base" --out "$work/run-$seed" "$@" --seed "$seed" \
    >"$work/run-$seed.out" 2>&1 &
  pids+=($!)
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || { cat "${runs[$i]}.out"; exit 1; }
done
trained=${runs[0]}
if [ ${#runs[@]} -gt 1 ]; then
  python3 -m onnx_models.train.average "${runs[@]}" "$work/soup"
  trained=$work/soup
fi
python3 -m onnx_models.train.travel shards "$trained" "$OUT/trained"
for run in "${runs[@]}"; do cat "$run/train.log"; done | tee "$OUT/trained/train.log" | tail -n 5
