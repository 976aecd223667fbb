"""Choose the rerank fusion weight on training questions; write it to manifest.json as ``rerank_fusion_weight``.

    PYTHONPATH=plugin python -m onnx_models.calibrate.fusion --model-dir onnx_models/default --questions 1000

``retrieval_evaluator``'s ``rerank`` orders the scored hits by

    evaluator score + w · engine score / best engine score of the scored hits

(``answerbox.processors.retrieval_evaluator.fusion``). This script picks w where it will not
be measured: a seeded sample of squad_shifts *training* questions (new_wiki + nyt; SQuAD
v1.1 dev, which ``bench/rerank_eval.py`` reports on, is refused). Each source file is
indexed in osmem-server on its own, as the dev paragraphs are in the bench, so a question's
candidates are its own file's paragraphs; the BM25 top 20 of each question is fetched with
its scores and scored by the evaluator once; then every w of the grid (0, 0.05, …, 2 by
default) reorders the same candidates. The weight with the best MRR@10 wins (ties: the
better R@1, then the smaller w); w = 0 is the evaluator alone, so a fusion that does not help
leaves today's order.

Run it after ``onnx_models.calibrate.thresholds``: w is on the scale of the calibrated score. Mind that
the shipped model was trained on these questions (their gold windows and BM25 negatives), so
the evaluator looks better on them than on unseen text and the chosen w leans low;
``--files amazon_reviews_v1.0.json reddit_v1.0.json`` chooses on squad_shifts files the model
has never seen instead, and ``--holdout F`` samples only the articles that a run with
``onnx_models.train.reader --holdout F`` left out (their files are still indexed whole, so the
candidates are as hard as before). ``--dry-run`` prints the table without writing the manifest.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from answerbox.core.config import ModelSettings
from answerbox.models import load_models
from answerbox.models.manifest import ModelManifest
from opensearchpy import OpenSearch

from onnx_models.data.squad import (
    DEV_FILE,
    TRAIN_FILES,
    Paragraph,
    default_tarball,
    held_out,
    holdout_fraction,
    load_squad,
    sample_questions,
)
from onnx_models.evaluate.ranking import (
    TOP_K,
    Candidates,
    bm25_top,
    cluster,
    evaluator_scores,
    fused_order,
    indexed,
    rank_metrics,
)

log = logging.getLogger("answerbox.fusion")

Metrics = dict[str, float]


@dataclass(frozen=True, slots=True)
class Choice:
    weight: float
    table: dict[float, Metrics]  # weight → R@1, MRR@10, R@k; 0 is the evaluator alone
    bm25: Metrics
    questions: int


def grid(step: float, top: float) -> list[float]:
    return [round(i * step, 6) for i in range(round(top / step) + 1)]


def choose(table: dict[float, Metrics]) -> float:
    """Best MRR@10, then best R@1, then the smallest weight."""
    return min(table, key=lambda w: (-table[w]["mrr@10"], -table[w]["r@1"], w))


def candidates_by_file(args: argparse.Namespace) -> tuple[list[str], list[int], list[Candidates], list[Paragraph]]:
    """The sampled questions, their gold paragraphs, their BM25 top k (each in its own file's index), and the
    paragraphs."""
    paragraphs = load_squad(args.files, args.data)
    pool = held_out(paragraphs, args.holdout) if args.holdout else paragraphs
    questions = sample_questions(pool, args.questions, args.seed)
    position = {p.id: i for i, p in enumerate(paragraphs)}
    by_file: dict[str, dict[int, Paragraph]] = collections.defaultdict(dict)
    for i, p in enumerate(paragraphs):
        by_file[p.id.split("/", 1)[0]][i] = p
    queries = [q.text for _, q in questions]
    golds = [position[p.id] for p, _ in questions]
    found: list[Candidates | None] = [None] * len(questions)
    with cluster(args.opensearch_url) as url:
        client = OpenSearch(hosts=[url], timeout=60)
        for name, docs in by_file.items():
            with indexed(
                client, "fusion-" + name.removesuffix(".json").replace("_", "-").replace(".", "-"), docs
            ) as index:
                for n, (gold, q) in enumerate(questions):
                    if gold.id.startswith(name + "/"):
                        found[n] = bm25_top(client, index, q.text, args.top_k)
            log.info("%s: %d paragraphs indexed and searched", name, len(docs))
    assert all(c is not None for c in found)
    return queries, golds, [c for c in found if c is not None], paragraphs


def run(args: argparse.Namespace) -> Choice:
    queries, golds, candidates, paragraphs = candidates_by_file(args)
    models = load_models(ModelSettings(dir=args.model_dir, variant=args.variant, providers=["CPUExecutionProvider"]))
    try:
        scores = asyncio.run(evaluator_scores(models, paragraphs, queries, candidates, args.concurrency))
    finally:
        models.close()
    table = {
        w: rank_metrics([fused_order(c, s, w) for c, s in zip(candidates, scores, strict=True)], golds, args.top_k)
        for w in grid(args.step, args.max_weight)
    }
    bm25 = rank_metrics([c.ids for c in candidates], golds, args.top_k)
    return Choice(weight=choose(table), table=table, bm25=bm25, questions=len(queries))


def print_table(choice: Choice, top_k: int) -> None:
    table, bm25, chosen = choice.table, choice.bm25, choice.weight
    print(f"{'w':>6}  {'R@1':>6}  {'MRR@10':>6}  {f'R@{top_k}':>6}")
    print(f"{'BM25':>6}  {bm25['r@1']:6.4f}  {bm25['mrr@10']:6.4f}  {bm25[f'r@{top_k}']:6.4f}")
    for w, row in table.items():
        mark = "  <- chosen" if w == chosen else ("  (evaluator alone)" if w == 0 else "")
        print(f"{w:6.2f}  {row['r@1']:6.4f}  {row['mrr@10']:6.4f}  {row[f'r@{top_k}']:6.4f}{mark}")


def write(args: argparse.Namespace, choice: Choice) -> Path:
    manifest = ModelManifest.load(args.model_dir)
    record: dict[str, Any] = {
        "data": [f"squad_shifts/{name}" for name in args.files],
        "holdout": args.holdout,
        "variant": args.variant,
        "questions": choice.questions,
        "seed": args.seed,
        "top_k": args.top_k,
        "engine": "osmem-server BM25" if args.opensearch_url is None else "given cluster",
        "engine_term": "engine _score / best _score of the candidates",
        "grid": [min(choice.table), max(choice.table), args.step],
        "chosen_by": "MRR@10, then R@1, then the smaller weight",
        "bm25": choice.bm25,
        "evaluator": choice.table[0.0],
        "fusion": choice.table[choice.weight],
    }
    # dataclasses.replace runs the manifest's validation of the weight.
    updated = manifest.replace(
        rerank_fusion_weight=choice.weight, calibration={**manifest.calibration, "rerank_fusion": record}
    )
    return updated.save(args.model_dir)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", type=Path, default=ModelSettings().dir)
    parser.add_argument("--variant", default="int8", help="choose for the variant that is served")
    parser.add_argument("--data", type=Path, default=default_tarball())
    parser.add_argument(
        "--files", nargs="+", default=list(TRAIN_FILES), help="squad_shifts files to sample questions from"
    )
    parser.add_argument("--questions", type=int, default=1000, help="seeded sample of questions (0 = all)")
    parser.add_argument(
        "--holdout",
        type=holdout_fraction,
        default=0.0,
        help="sample only the articles a run with this --holdout never trained on",
    )
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--top-k", type=int, default=TOP_K, help="BM25 candidates per question")
    parser.add_argument("--step", type=float, default=0.05)
    parser.add_argument("--max-weight", type=float, default=2.0)
    parser.add_argument("--opensearch-url", help="use this cluster instead of starting osmem-server")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--dry-run", action="store_true", help="print the table; leave the manifest alone")
    args = parser.parse_args(argv)
    if DEV_FILE in args.files:
        parser.error(f"{DEV_FILE} is what bench/rerank_eval.py reports on: choose the weight on other questions")
    if not (args.step > 0 and args.max_weight >= 0):
        parser.error("--step must be > 0 and --max-weight >= 0")
    return args


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("opensearch").setLevel(logging.WARNING)  # a line per search otherwise
    args = parse_args()
    choice = run(args)
    print_table(choice, args.top_k)
    if choice.weight == max(choice.table) and choice.weight > 0:
        print(f"note: the best weight is the grid's largest ({choice.weight}); try a larger --max-weight")
    if args.dry_run:
        print(f"chosen rerank_fusion_weight {choice.weight} (dry run: manifest not written)")
        return
    print(f"rerank_fusion_weight {choice.weight} written to {write(args, choice)}")


if __name__ == "__main__":
    main()
