"""Choose θ, CRAG's upper/lower thresholds and the score calibration on training articles; write them to manifest.json.

    PYTHONPATH=plugin python -m onnx_models.calibrate.thresholds --model-dir onnx_models/default

Pairs: each sampled question of the held-out training articles (squad_shifts new_wiki + nyt,
the ``--holdout`` articles ``onnx_models.train.reader`` left out; SQuAD v1.1 dev, which the benches
report on, is refused) with its gold paragraph and its top BM25 paragraphs among all the
files' paragraphs. A manifest's ``calibration.data`` says which questions chose its
constants; ``--dry-run`` prints them and leaves the manifest alone. A pair is *relevant* when
the passage contains a gold answer (normalised), which is what CRAG's evaluator is meant to
detect.

1. score calibration: Platt scaling of the relevance logit z, P(relevant) = σ(a·z + b);
   the evaluator reports ``tanh((a·z + b) / 2) = 2·P - 1``, so scale = a/2, offset = b/2.
2. ``crag_upper``: the lowest score at which at least ``--upper-precision`` of the pairs
   scoring that high are relevant ("Correct" is then trustworthy).
3. ``crag_lower``: CRAG calls a retrieval Incorrect when *every* hit scores below it, so
   it is calibrated on each question's best score over its pairs (the gold paragraph and
   its BM25 neighbours): the ``--lower-recall`` quantile from the bottom of those best
   scores, among questions whose pairs hold the answer. That share of retrievals that hold
   the answer is never called Incorrect, and the threshold sits where a retrieval without
   the answer falls. (A per-pair quantile put it so low that a top 10 without the gold
   paragraph almost always had one hit above it.) That per-pair quantile is kept as
   ``support_lower``: the citation check judges one (claim, passage) pair.
4. ``theta``: the lowest relevance logit (the reader's confidence f) at which at least
   ``--theta-precision`` of the pairs above it hold the answer: SearChain corrects a node
   only when the reader is confident the document answers it. (Gating on span
   correctness instead is out of reach: our spans are right on ~45% of relevant pairs,
   and that rate barely rises with f; the manifest records it above θ.)
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
from answerbox.core.config import ModelSettings
from answerbox.models import Models, load_models
from answerbox.models.confidence import platt
from answerbox.models.manifest import ModelManifest

from onnx_models.data.squad import (
    BM25,
    DEV_FILE,
    TRAIN_FILES,
    Paragraph,
    Question,
    default_tarball,
    f1_score,
    held_out,
    holdout_fraction,
    load_squad,
    normalize_answer,
    sample_questions,
)

log = logging.getLogger("answerbox.calibrate")

_CONCURRENCY = 8
_MIN_SUPPORT = 20


@dataclass(frozen=True, slots=True)
class Pair:
    question: int  # index of the question in the sample: its pairs form one retrieval
    relevance: float  # the reader's confidence (relevance logit of its best window)
    relevant: bool
    span_correct: bool


async def score_pairs(
    models: Models, paragraphs: Sequence[Paragraph], questions: Sequence[tuple[Paragraph, Question]], negatives: int
) -> list[Pair]:
    bm25 = BM25([p.context for p in paragraphs])
    normalized = [normalize_answer(p.context) for p in paragraphs]
    position = {p.id: i for i, p in enumerate(paragraphs)}

    async def one(index: int, gold: Paragraph, q: Question) -> list[Pair]:
        ranked = [int(i) for i in np.argsort(-np.asarray(bm25.scores(q.text)))[: negatives + 1]]
        chosen = [position[gold.id], *[i for i in ranked if i != position[gold.id]][:negatives]]
        spans = await models.reader.read(q.text, [paragraphs[i].context for i in chosen])
        answers = [normalize_answer(a) for a in q.answers]
        out = []
        for i, span in zip(chosen, spans, strict=True):
            relevant = any(a and a in normalized[i] for a in answers)
            out.append(Pair(index, span.confidence, relevant, relevant and f1_score(span.text, q.answers) >= 0.5))
        return out

    pairs: list[Pair] = []
    # Several questions in flight at once so the micro-batcher fills its batches.
    for start in range(0, len(questions), _CONCURRENCY):
        chunk = questions[start : start + _CONCURRENCY]
        for result in await asyncio.gather(*(one(start + i, gold, q) for i, (gold, q) in enumerate(chunk))):
            pairs.extend(result)
        if (start // _CONCURRENCY) % 25 == 0:
            log.info("%d/%d questions", start + len(chunk), len(questions))
    return pairs


def lowest_threshold_with_precision(
    values: npt.NDArray[np.float64], good: npt.NDArray[np.bool_], target: float
) -> float:
    """The smallest t such that the items with value >= t are at least ``target`` good.

    Prefixes shorter than ``_MIN_SUPPORT`` items are ignored: one lucky top item is no
    evidence. When no threshold qualifies, the maximum value is returned (trust nothing).
    """
    order = np.argsort(-values)
    precision = np.cumsum(good[order]) / np.arange(1, len(values) + 1)
    precision[: _MIN_SUPPORT - 1] = 0.0
    ok = np.nonzero(precision >= target)[0]
    if len(ok) == 0:
        return float(values.max())
    return float(values[order][ok.max()])


def best_scores_holding_answer(pairs: Sequence[Pair], scores: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Per question whose pairs hold the answer, the best score among its pairs."""
    best: dict[int, float] = {}
    holds = {p.question for p in pairs if p.relevant}
    for pair, score in zip(pairs, scores, strict=True):
        if pair.question in holds:
            best[pair.question] = max(best.get(pair.question, -1.0), float(score))
    return np.array(list(best.values()))


def calibrate(args: argparse.Namespace) -> ModelManifest:
    if args.pairs_in:
        pairs = [Pair(*row) for row in json.loads(args.pairs_in.read_text())]
    else:
        paragraphs = load_squad(args.files, args.data)
        pool = held_out(paragraphs, args.holdout) if args.holdout else paragraphs
        questions = sample_questions(pool, args.limit, args.seed)
        models = load_models(
            ModelSettings(dir=args.model_dir, variant=args.variant, providers=["CPUExecutionProvider"])
        )
        try:
            pairs = asyncio.run(score_pairs(models, paragraphs, questions, args.negatives))
        finally:
            models.close()
    if args.pairs_out:
        args.pairs_out.write_text(json.dumps([dataclasses.astuple(p) for p in pairs]))
    z = np.array([p.relevance for p in pairs])
    relevant = np.array([p.relevant for p in pairs])
    correct = np.array([p.span_correct for p in pairs])
    a, b = platt(z.tolist(), relevant.tolist())
    scale, offset = a / 2, b / 2
    scores = np.tanh(scale * z + offset)
    upper = lowest_threshold_with_precision(scores, relevant, args.upper_precision)
    lower = float(np.quantile(best_scores_holding_answer(pairs, scores), 1 - args.lower_recall))
    support_lower = float(np.quantile(scores[relevant], 1 - args.lower_recall))
    theta = lowest_threshold_with_precision(z, relevant, args.theta_precision)
    manifest = ModelManifest.load(args.model_dir)
    manifest = manifest.replace(
        theta=round(theta, 4),
        crag_upper=round(upper, 4),
        crag_lower=round(lower, 4),
        support_lower=round(support_lower, 4),
        score_scale=round(scale, 6),
        score_offset=round(offset, 6),
        # The later steps' records (rerank_fusion, span_cover, answer_confidence) stay: a rerun of
        # this step alone rewrites its own keys, not theirs.
        calibration={
            **manifest.calibration,
            "data": [f"squad_shifts/{name}" for name in args.files],
            "holdout": args.holdout,
            "variant": args.variant,
            "questions": len(pairs) // (args.negatives + 1),
            "pairs": len(pairs),
            "relevant_pairs": int(relevant.sum()),
            "bm25_negatives_per_question": args.negatives,
            "seed": args.seed,
            "upper_precision": args.upper_precision,
            "lower_recall": args.lower_recall,
            "theta_precision": args.theta_precision,
            "platt_a": round(a, 6),
            "platt_b": round(b, 6),
            "share_above_upper": round(float((scores >= upper).mean()), 4),
            "share_below_lower": round(float((scores < lower).mean()), 4),
            "lower_from": "best score per question",
            "relevant_share_above_theta": round(float(relevant[z >= theta].mean()), 4),
            "reader_span_correct_above_theta": round(float(correct[z >= theta].mean()), 4),
            "reader_span_correct_given_relevant": round(float(correct.sum() / max(1, relevant.sum())), 4),
            "reader_correct_recall_at_theta": round(float((correct & (z >= theta)).sum() / max(1, correct.sum())), 4),
        },
    )
    if not args.dry_run:
        manifest.save(args.model_dir)
    return manifest


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", type=Path, default=ModelSettings().dir)
    parser.add_argument("--variant", default="int8", help="calibrate the variant that is served")
    parser.add_argument("--data", type=Path, default=default_tarball())
    parser.add_argument(
        "--files", nargs="+", default=list(TRAIN_FILES), help="squad_shifts files to sample questions from"
    )
    parser.add_argument(
        "--holdout",
        type=holdout_fraction,
        default=0.1,
        help="sample only the articles a run with this --holdout never trained on (0: every article)",
    )
    parser.add_argument("--limit", type=int, default=1500, help="questions sampled (0 = all)")
    parser.add_argument("--negatives", type=int, default=3, help="BM25 negatives per question")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--upper-precision", type=float, default=0.9)
    parser.add_argument("--lower-recall", type=float, default=0.95)
    parser.add_argument("--theta-precision", type=float, default=0.9)
    parser.add_argument(
        "--pairs-out", type=Path, help="also save the scored pairs (relevance, relevant, correct) as JSON"
    )
    parser.add_argument("--pairs-in", type=Path, help="recompute thresholds from saved pairs without running the model")
    parser.add_argument("--dry-run", action="store_true", help="print the constants; leave the manifest alone")
    args = parser.parse_args(argv)
    if DEV_FILE in args.files:
        parser.error(f"{DEV_FILE} is what the benches report on: choose the thresholds on other questions")
    return args


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    result = calibrate(parse_args())
    print(
        json.dumps(
            {k: getattr(result, k) for k in ("theta", "crag_upper", "crag_lower", "score_scale", "score_offset")}
        )
    )
    print(json.dumps(result.calibration, indent=2))
