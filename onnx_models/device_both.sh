#!/usr/bin/env bash
# The two models issues 61 and 63 wait for, trained at once in one lent-GPU call (each leaves the
# GPU mostly idle): a student reader (STUDENT layers, distilled) and the claim verifier, each a
# seed soup from onnx_models/device_train.sh. A call brings back one model (at most 8 files, 64 MiB):
# the verifier comes back in $OUT/trained; the student waits in .gpu-stash/trained (git ignores it,
# and a warm machine keeps it) for a second call, made at once (the machine goes back after 30 s idle):
#   bash onnx_models/device_both.sh "READER ARGS" "VERIFIER ARGS"     # carry [".gpu"]
#   cp -r .gpu-stash/trained "$OUT/"                                    # the second call
# with .gpu prepared as device_train.sh says (base, data, pairs, wheels: 60 MB with the tree), e.g.
#   bash onnx_models/device_both.sh "--lr 1e-4 --epochs 4 --hard-negatives-from 4 --holdout 0.1 --bf16
#     --train-embeddings --max-minutes 7" "--vitaminc 100000 --contrastive 100000 --epochs 3 --lr 5e-5
#     --bf16 --max-minutes 7"
# STUDENT (default "0 1 2"), STUDENT_SEEDS ("41 42 43 44") and VERIFIER_SEEDS ("41 42 43") as in
# device_train.sh; the student's console output is .gpu-stash/student.out.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
stash=.gpu-stash
rm -rf "$stash"
mkdir -p "$stash"
read -ra student_args <<<"$1"
read -ra verifier_args <<<"$2"
OUT=$stash STUDENT="${STUDENT:-0 1 2}" SEEDS="${STUDENT_SEEDS:-41 42 43 44}" \
  bash onnx_models/device_train.sh "${student_args[@]}" >"$stash/student.out" 2>&1 &
student=$!
TRAINER=verifier SEEDS="${VERIFIER_SEEDS:-41 42 43}" bash onnx_models/device_train.sh "${verifier_args[@]}"
wait "$student" || { tail -n 40 "$stash/student.out"; exit 1; }
echo "the student waits in $stash/trained:"
tail -n 5 "$stash/student.out"
