"""Evaluator as a reranker: BM25 top-20 from osmem-server over the 2,067 SQuAD dev paragraphs,
reordered by ``evaluator.score``; R@1 and MRR@10 of the gold paragraph before and after.

    PYTHONPATH=plugin python -m bench.rerank_eval --limit 1000
    PYTHONPATH=plugin python -m bench.rerank_eval --opensearch-url http://127.0.0.1:9200  # a real cluster

Starts its own osmem-server (an OpenSearch-compatible in-memory server) unless given a URL;
the index is uniquely named and deleted afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

from answerbox.config import ModelSettings
from answerbox.models import Models, load_models
from opensearchpy import OpenSearch, helpers

from onnx_models.squad import DEV_FILE, Paragraph, default_tarball, load_squad, sample_questions

TOP_K = 20


@contextlib.contextmanager
def cluster(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    from osmem_server import OsmemServer

    with OsmemServer.start() as server:
        yield server.url


def bm25_top(client: OpenSearch, index: str, query: str) -> list[int]:
    body = {"size": TOP_K, "query": {"match": {"text": query}}, "_source": False}
    return [int(hit["_id"]) for hit in client.search(index=index, body=body)["hits"]["hits"]]


def rank_metrics(rankings: Sequence[Sequence[int]], golds: Sequence[int]) -> dict[str, float]:
    r1 = mrr = hit = 0.0
    for ranking, gold in zip(rankings, golds, strict=True):
        if gold in ranking:
            rank = ranking.index(gold) + 1
            hit += 1
            r1 += rank == 1
            mrr += 1 / rank if rank <= 10 else 0.0
    n = len(golds)
    return {"r@1": round(r1 / n, 4), "mrr@10": round(mrr / n, 4), f"r@{TOP_K}": round(hit / n, 4)}


async def rerank_all(
    models: Models,
    paragraphs: Sequence[Paragraph],
    queries: Sequence[str],
    candidates: Sequence[list[int]],
    concurrency: int,
) -> list[list[int]]:
    gate = asyncio.Semaphore(concurrency)

    async def one(query: str, ids: list[int]) -> list[int]:
        async with gate:
            scores = await models.evaluator.score(query, [paragraphs[i].context for i in ids])
        return [i for _, i in sorted(zip(scores, ids, strict=True), key=lambda pair: -pair[0])]

    return await asyncio.gather(*(one(q, ids) for q, ids in zip(queries, candidates, strict=True)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", type=Path, default=ModelSettings().dir)
    parser.add_argument("--variant", default="int8", choices=["int8", "fp32", "fp16"])
    parser.add_argument("--data", type=Path, default=default_tarball())
    parser.add_argument("--limit", type=int, default=1000, help="seeded sample of questions (0 = all 10,565)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--opensearch-url", help="use this cluster instead of starting osmem-server")
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()

    paragraphs = load_squad([DEV_FILE], args.data)
    position = {p.id: i for i, p in enumerate(paragraphs)}
    questions = sample_questions(paragraphs, args.limit, args.seed)
    queries = [q.text for _, q in questions]
    golds = [position[p.id] for p, _ in questions]

    index = f"squad-dev-{uuid.uuid4().hex[:8]}"
    with cluster(args.opensearch_url) as url:
        client = OpenSearch(hosts=[url], timeout=60)
        try:
            client.indices.create(index=index, body={"mappings": {"properties": {"text": {"type": "text"}}}})
            helpers.bulk(
                client,
                ({"_index": index, "_id": str(i), "text": p.context} for i, p in enumerate(paragraphs)),
                refresh=True,
            )
            started = time.perf_counter()
            candidates = [bm25_top(client, index, q) for q in queries]
            search_s = time.perf_counter() - started
        finally:
            client.indices.delete(index=index, ignore_unavailable=True)

    models = load_models(ModelSettings(dir=args.model_dir, variant=args.variant, providers=["CPUExecutionProvider"]))
    try:
        started = time.perf_counter()
        reranked = asyncio.run(rerank_all(models, paragraphs, queries, candidates, args.concurrency))
        rerank_s = time.perf_counter() - started
    finally:
        models.close()
    pairs = sum(len(c) for c in candidates)
    print(
        json.dumps(
            {
                "questions": len(queries),
                "paragraphs": len(paragraphs),
                "bm25": rank_metrics(candidates, golds),
                "reranked": rank_metrics(reranked, golds),
                "variant": args.variant,
                "search_s": round(search_s, 1),
                "rerank_s": round(rerank_s, 1),
                "pairs_per_s": round(pairs / rerank_s, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
