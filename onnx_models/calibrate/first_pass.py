"""Choose ``crag_first_pass_stop``: where ``retrieval_evaluator``'s first pass over the engine's best hits is enough.

    PYTHONPATH=plugin:. python -m onnx_models.calibrate.first_pass --questions 600 --stops 0.517 0.6

A seeded sample of the held-out training articles' questions (as ``answer_confidence`` samples
them; SQuAD dev and the other-domain files are never read) goes through the extractive pipeline
over every training paragraph: once scoring its ten hits in one pass, and once per stop with
``first_pass`` (``--first-pass``, a pipeline's default 4) and that ``first_pass_stop``. A stop
changes which hits an answer is read from, and so what the confidence's signals mean: each
run's calibrator is refitted on its own rows (five folds, ``answer_confidence``'s fit), and the
runs compare by the share answered at 85% precision (the point estimate) and their p50 (and p90) seconds.
``--evaluator`` sets more of ``retrieval_evaluator``'s config in every run (another default, measured
against the shipped one).
Chosen: the lowest stop answering within ``--tolerance`` (half a point) of one pass; none: one
pass. ``--write`` puts it in the manifest (``null`` when none); refit ``answer_confidence``
after it, with the stop in the loop.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from answerbox.core.config import ModelSettings
from answerbox.models.confidence import SnippetSignals
from answerbox.models.manifest import ModelManifest
from answerbox.ops.thresholds import answered_at, lowest_threshold
from answerbox.processors.retrieval_evaluator.processor import RetrievalEvaluatorConfig
from osmem_server import OsmemServer

from onnx_models.calibrate.answer_confidence import answer_of, answerbox, fit, pipeline, row
from onnx_models.data.squad import (
    TRAIN_FILES,
    Question,
    held_out,
    holdout_fraction,
    index_with_titles,
    load_squad,
    sample_questions,
)
from onnx_models.evaluate.rows import Row

log = logging.getLogger("answerbox.first_pass")

FIRST_PASS: int = RetrievalEvaluatorConfig.model_fields["first_pass"].default  # what a pipeline gets


def first_pass_pipeline(
    stop: float | None, first_pass: int = FIRST_PASS, evaluator: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``answer_confidence``'s extractive pipeline, in one pass (``stop`` None) or two, with ``evaluator``'s
    settings on top of ``retrieval_evaluator``'s."""
    chosen = pipeline("extractive")
    config = chosen["response_processors"][0]["retrieval_evaluator"]
    config |= {"first_pass": None} if stop is None else {"first_pass": first_pass, "first_pass_stop": stop}
    config |= evaluator or {}
    return chosen


def measured(rows: Sequence[Row], precision: float, l2: float, seed: int) -> dict[str, float]:
    """The share answered at ``precision`` (refitted, cross-validated confidence) and the p50 and p90 seconds."""
    usable = [r for r in rows if r["signals"] is not None]
    _, cv = fit(usable, SnippetSignals, l2, seed)
    by_id = {r["id"]: float(c) for r, c in zip(usable, cv, strict=True)}
    confidence = [by_id.get(r["id"], 0.0) for r in rows]
    right = [bool(r["right"]) for r in rows]
    at = answered_at(confidence, right, lowest_threshold(confidence, right, precision, 0.0))
    seconds = [r["seconds"] for r in rows]
    return {
        **at,
        "seconds_p50": round(float(np.quantile(seconds, 0.5)), 4),
        "seconds_p90": round(float(np.quantile(seconds, 0.9)), 4),
    }


def choose(runs: dict[float | None, dict[str, float]], tolerance: float) -> float | None:
    """The lowest stop answering within ``tolerance`` of one pass (``runs[None]``); None when none does."""
    floor = runs[None]["coverage"] - tolerance
    return min((stop for stop, run in runs.items() if stop is not None and run["coverage"] >= floor), default=None)


def run(args: argparse.Namespace) -> dict[str, Any]:
    paragraphs = load_squad(TRAIN_FILES, args.data)
    questions: list[Question] = [
        q for _, q in sample_questions(held_out(paragraphs, args.holdout), args.questions, args.seed)
    ]
    served = {"dir": args.model_dir, "variant": args.variant}
    runs: dict[float | None, dict[str, float]] = {}
    with contextlib.ExitStack() as stack, httpx.Client(timeout=600) as client:
        osmem = stack.enter_context(OsmemServer.start(japanese=False))
        index_with_titles(client, osmem.url, paragraphs, "all")
        url = stack.enter_context(answerbox(osmem.url, None, None, "extractive", served))
        for stop in [None, *args.stops]:
            name = "one-pass" if stop is None else f"stop-{stop}"
            chosen = first_pass_pipeline(stop, args.first_pass, args.evaluator)
            response = client.put(f"{url}/_search/pipeline/{name}", json=chosen)
            response.raise_for_status()
            answer_of(client, url, "all", "warm up", name)
            rows = [row("answerable", q, *answer_of(client, url, "all", q.text, name)) for q in questions]
            runs[stop] = measured(rows, args.precision, args.l2, args.seed)
            log.info("%s: %s", name, runs[stop])
    return {
        "crag_first_pass_stop": choose(runs, args.tolerance),
        "record": {
            "questions": len(questions),
            "holdout": args.holdout,
            "seed": args.seed,
            "first_pass": args.first_pass,
            "evaluator": args.evaluator,
            "precision": args.precision,
            "tolerance": args.tolerance,
            "runs": {"one pass" if stop is None else str(stop): run for stop, run in runs.items()},
        },
    }


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", type=Path, default=ModelSettings().dir)
    parser.add_argument("--variant", default="int8")
    parser.add_argument(
        "--data", type=Path, default=None, help="the bigbench tarball (default: in $ANSWERBOX_DATA_DIR)"
    )
    parser.add_argument("--holdout", type=holdout_fraction, default=0.1)
    parser.add_argument("--questions", type=int, default=600)
    parser.add_argument(
        "--first-pass", type=int, default=FIRST_PASS, help="hits in the first pass (a pipeline's default: 4)"
    )
    parser.add_argument("--stops", type=float, nargs="+", default=[0.517, 0.6])
    parser.add_argument(
        "--evaluator",
        type=json.loads,
        default={},
        help='retrieval_evaluator settings for every run, as JSON (\'{"ambiguous": "refine+corrective_search"}\')',
    )
    parser.add_argument("--precision", type=float, default=0.85)
    parser.add_argument("--tolerance", type=float, default=0.005, help="coverage a stop may lose against one pass")
    parser.add_argument("--l2", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=45)
    parser.add_argument("--write", action="store_true", help="write the chosen stop and its record to manifest.json")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    for chatty in ("httpx", "opensearch"):
        logging.getLogger(chatty).setLevel(logging.WARNING)
    args = parse_args(argv)
    chosen = run(args)
    print(json.dumps(chosen, indent=2))
    if args.write:
        manifest = ModelManifest.load(args.model_dir)
        calibration = {**manifest.calibration, "first_pass": chosen["record"]}
        stop = chosen["crag_first_pass_stop"]
        print(f"wrote {manifest.replace(crag_first_pass_stop=stop, calibration=calibration).save(args.model_dir)}")


if __name__ == "__main__":
    main()
