"""Evaluator as a reranker: BM25 top-20 from osmem-server over the 2,067 SQuAD dev paragraphs,
reordered by the evaluator alone and by its fusion with BM25 (what ``retrieval_evaluator``'s
``rerank`` serves); R@1 and MRR@10 of the gold paragraph for each of the three orders.

    PYTHONPATH=plugin python -m bench.rerank_eval --limit 1000
    PYTHONPATH=plugin python -m bench.rerank_eval --fusion-weight 0.3    # another weight than the manifest's
    PYTHONPATH=plugin python -m bench.rerank_eval --opensearch-url http://127.0.0.1:9200  # a real cluster

The fusion is ``evaluator score + w · BM25 score / best BM25 score of the top 20``
(``answerbox.processors.retrieval_evaluator.fusion``) with the manifest's
``rerank_fusion_weight`` unless ``--fusion-weight`` is given; the weight is chosen on
training questions by ``python -m onnx_models.calibrate.fusion``, never on these. Starts its own
osmem-server unless given a URL; the index is uniquely named and deleted afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

from answerbox.core.config import ModelSettings
from answerbox.models import load_models
from opensearchpy import OpenSearch

from onnx_models.data.squad import DEV_FILE, default_tarball, load_squad, sample_questions
from onnx_models.evaluate.ranking import bm25_top, cluster, evaluator_scores, fused_order, indexed, rank_metrics


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", type=Path, default=ModelSettings().dir)
    parser.add_argument("--variant", default="int8", choices=["int8", "fp32", "fp16"])
    parser.add_argument("--data", type=Path, default=default_tarball())
    parser.add_argument("--limit", type=int, default=1000, help="seeded sample of questions (0 = all 10,565)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--fusion-weight", type=float, help="the BM25 term's weight (default: the manifest's rerank_fusion_weight)"
    )
    parser.add_argument("--opensearch-url", help="use this cluster instead of starting osmem-server")
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    if args.fusion_weight is not None and not args.fusion_weight >= 0:
        parser.error(f"--fusion-weight must be >= 0, not {args.fusion_weight}")

    paragraphs = load_squad([DEV_FILE], args.data)
    position = {p.id: i for i, p in enumerate(paragraphs)}
    questions = sample_questions(paragraphs, args.limit, args.seed)
    queries = [q.text for _, q in questions]
    golds = [position[p.id] for p, _ in questions]

    with cluster(args.opensearch_url) as url:
        client = OpenSearch(hosts=[url], timeout=60)
        with indexed(client, "squad-dev", dict(enumerate(paragraphs))) as index:
            started = time.perf_counter()
            candidates = [bm25_top(client, index, q) for q in queries]
            search_s = time.perf_counter() - started

    models = load_models(ModelSettings(dir=args.model_dir, variant=args.variant, providers=["CPUExecutionProvider"]))
    try:
        weight = models.manifest.rerank_fusion_weight if args.fusion_weight is None else args.fusion_weight
        started = time.perf_counter()
        scores = asyncio.run(evaluator_scores(models, paragraphs, queries, candidates, args.concurrency))
        rerank_s = time.perf_counter() - started
    finally:
        models.close()
    pairs = sum(len(c.ids) for c in candidates)
    print(
        json.dumps(
            {
                "questions": len(queries),
                "paragraphs": len(paragraphs),
                "bm25": rank_metrics([c.ids for c in candidates], golds),
                "evaluator": rank_metrics(
                    [fused_order(c, s, 0.0) for c, s in zip(candidates, scores, strict=True)], golds
                ),
                "fusion": rank_metrics(
                    [fused_order(c, s, weight) for c, s in zip(candidates, scores, strict=True)], golds
                ),
                "fusion_weight": weight,
                "fusion_weight_from": "manifest" if args.fusion_weight is None else "--fusion-weight",
                "variant": args.variant,
                "search_s": round(search_s, 1),
                "rerank_s": round(rerank_s, 1),
                "pairs_per_s": round(pairs / rerank_s, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
