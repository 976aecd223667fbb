"""Model throughput on realistic pairs (SQuAD dev questions with their gold paragraphs).

    PYTHONPATH=plugin python -m bench.model_throughput

1. pairs/s at batch 1 and 16: ONNX int8, ONNX fp32, PyTorch eager (from the training checkpoint),
   and int8 over PyTorch;
2. per-batch padding vs padding every batch to max_length (int8, batch 16);
3. int8's F1 delta against fp32 on a sample of dev questions;
4. the micro-batcher: 16 concurrent callers vs one caller at a time, through ``reader.read``:
   throughput ratio and the added wait (time queued before the batch starts), p50/p99.

A 2-core VM's neighbours slow single passes by up to half, at random: so every
configuration of 1. and 2. is timed once per round, the rounds interleave them, and each
reports its median over ``--rounds``; a ratio is the median of the per-round ratios, whose
two sides ran seconds apart.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from answerbox.core.config import ModelSettings
from answerbox.models import Models, load_models
from answerbox.models.manifest import ModelManifest
from answerbox.models.session import CPU

from bench.harness import Batch, Timed, first_windows, interleaved_pairs_per_s, median_ratio, onnx_runner, torch_runner
from onnx_models.data.squad import (
    DEV_FILE,
    Paragraph,
    Question,
    data_dir,
    default_tarball,
    load_squad,
    sample_questions,
)
from onnx_models.evaluate.reading import evaluate


async def batcher_run(models: Models, requests: Sequence[tuple[Paragraph, Question]], callers: int) -> dict[str, float]:
    queue = list(reversed(requests))
    latencies: list[float] = []

    async def caller() -> None:
        while queue:
            paragraph, question = queue.pop()
            started = time.perf_counter()
            await models.reader.read(question.text, [paragraph.context])
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(callers)))
    seconds = time.perf_counter() - started
    waits = sorted(models.encoder.batcher.stats.waits_s)
    return {
        "requests_per_s": round(len(requests) / seconds, 1),
        "latency_p50_ms": round(1000 * statistics.median(latencies), 1),
        "latency_p99_ms": round(1000 * float(np.quantile(latencies, 0.99)), 1),
        "added_wait_p50_ms": round(1000 * statistics.median(waits), 1),
        "added_wait_p99_ms": round(1000 * float(np.quantile(waits, 0.99)), 1),
        "mean_batch": round(models.encoder.batcher.stats.mean_batch, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", type=Path, default=ModelSettings().dir)
    parser.add_argument(
        "--checkpoint", type=Path, default=data_dir() / "train_out", help="the PyTorch checkpoint exported"
    )
    parser.add_argument("--data", type=Path, default=default_tarball())
    parser.add_argument("--pairs", type=int, default=96, help="windows timed per configuration")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds (medians are reported)")
    parser.add_argument("--f1-sample", type=int, default=1000, help="dev questions for the int8 vs fp32 F1 delta")
    parser.add_argument("--requests", type=int, default=128, help="requests for the micro-batcher comparison")
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (0 = all cores)")
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()

    manifest = ModelManifest.load(args.model_dir)
    paragraphs = load_squad([DEV_FILE], args.data)
    sample = sample_questions(paragraphs, max(args.pairs, args.requests), args.seed)
    windows = first_windows(args.model_dir, sample[: args.pairs])
    report: dict[str, object] = {"mean_tokens": round(float(np.mean([len(w) for w in windows])), 1)}

    engines: dict[str, Callable[[Batch], object] | None] = {
        "onnx_int8": onnx_runner(manifest.model_path(args.model_dir, "int8"), args.threads),
        "onnx_fp32": onnx_runner(manifest.model_path(args.model_dir, "fp32"), args.threads),
        "torch_eager": torch_runner(args.checkpoint, args.threads),
    }
    configs = {f"{name}/batch_{b}": Timed(run, b) for name, run in engines.items() if run is not None for b in (1, 16)}
    int8 = engines["onnx_int8"]
    assert int8 is not None
    configs["onnx_int8/batch_16/fixed_max_length"] = Timed(int8, 16, pad_to=manifest.max_length)
    timed = interleaved_pairs_per_s(configs, windows, args.rounds)
    report["rounds"] = args.rounds
    report["pairs_per_s_median"] = {name: round(statistics.median(v), 1) for name, v in timed.items()}
    report["pairs_per_s_range"] = {name: [round(min(v), 1), round(max(v), 1)] for name, v in timed.items()}
    if engines["torch_eager"] is not None:
        report["int8_over_torch"] = {
            f"batch_{b}": median_ratio(timed[f"onnx_int8/batch_{b}"], timed[f"torch_eager/batch_{b}"]) for b in (1, 16)
        }
    report["padding_int8_batch16_fixed_over_per_batch"] = median_ratio(
        timed["onnx_int8/batch_16/fixed_max_length"], timed["onnx_int8/batch_16"]
    )

    questions = sample_questions(paragraphs, args.f1_sample, args.seed + 1)
    f1 = {}
    for variant in ("int8", "fp32"):
        models = load_models(ModelSettings(dir=args.model_dir, variant=variant, providers=[CPU]))
        try:
            f1[variant] = evaluate(models, questions)["f1"]
        finally:
            models.close()
    report["f1_sample"] = {**f1, "questions": len(questions), "int8_minus_fp32": round(f1["int8"] - f1["fp32"], 2)}

    runs: dict[str, dict[str, float]] = {}
    requests = sample[: args.requests]
    for label, callers in (("one_at_a_time", 1), ("callers_16", 16)):
        models = load_models(ModelSettings(dir=args.model_dir, variant="int8", providers=[CPU]))
        try:
            runs[label] = asyncio.run(batcher_run(models, requests, callers))
        finally:
            models.close()
    ratio = round(runs["callers_16"]["requests_per_s"] / runs["one_at_a_time"]["requests_per_s"], 2)
    report["micro_batcher"] = {**runs, "throughput_ratio": ratio}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
