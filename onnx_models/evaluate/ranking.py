"""BM25 candidates from a search engine, the evaluator's scores for them, and rank metrics.

Shared by ``bench/rerank_eval.py`` (dev questions) and ``onnx_models/calibrate/fusion.py`` (training
questions), so the weight is chosen on exactly the ranking the bench measures. The engine is
osmem-server (an OpenSearch-compatible in-memory server) started here unless a URL is given;
each index is uniquely named and deleted afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from answerbox.models import Models
from answerbox.processors.retrieval_evaluator.fusion import fuse
from opensearchpy import OpenSearch, helpers

from onnx_models.data.squad import Paragraph

__all__ = ["TOP_K", "Candidates", "bm25_top", "cluster", "evaluator_scores", "fused_order", "indexed", "rank_metrics"]

log = logging.getLogger("answerbox.ranking")

TOP_K = 20


@dataclass(frozen=True, slots=True)
class Candidates:
    """One question's BM25 top k in the engine's order: paragraph positions and the engine's ``_score``."""

    ids: list[int]
    scores: list[float]


@contextlib.contextmanager
def cluster(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    from osmem_server import OsmemServer

    with OsmemServer.start() as server:
        yield server.url


@contextlib.contextmanager
def indexed(client: OpenSearch, prefix: str, docs: dict[int, Paragraph]) -> Iterator[str]:
    """A fresh index holding ``docs`` (id → paragraph) as ``{"text": context}``; deleted on the way out."""
    index = f"{prefix}-{uuid.uuid4().hex[:8]}"
    try:
        client.indices.create(index=index, body={"mappings": {"properties": {"text": {"type": "text"}}}})
        helpers.bulk(
            client, ({"_index": index, "_id": str(i), "text": p.context} for i, p in docs.items()), refresh=True
        )
        yield index
    finally:
        client.indices.delete(index=index, ignore_unavailable=True)


def bm25_top(client: OpenSearch, index: str, query: str, k: int = TOP_K) -> Candidates:
    body = {"size": k, "query": {"match": {"text": query}}, "_source": False}
    hits = client.search(index=index, body=body)["hits"]["hits"]
    return Candidates(ids=[int(hit["_id"]) for hit in hits], scores=[float(hit["_score"]) for hit in hits])


async def evaluator_scores(
    models: Models,
    paragraphs: Sequence[Paragraph],
    queries: Sequence[str],
    candidates: Sequence[Candidates],
    concurrency: int,
) -> list[list[float]]:
    """``evaluator.score`` of every candidate, once; several questions in flight so the micro-batcher fills its
    batches."""
    gate = asyncio.Semaphore(concurrency)
    done = 0

    async def one(query: str, found: Candidates) -> list[float]:
        nonlocal done
        async with gate:
            scores = await models.evaluator.score(query, [paragraphs[i].context for i in found.ids])
        done += 1
        if done % 200 == 0:
            log.info("scored %d/%d questions", done, len(queries))
        return scores

    return list(await asyncio.gather(*(one(q, c) for q, c in zip(queries, candidates, strict=True))))


def fused_order(found: Candidates, scores: Sequence[float], weight: float) -> list[int]:
    """The candidates as ``retrieval_evaluator``'s rerank orders them (stable: ties keep the engine's order)."""
    keys = fuse(scores, found.scores, weight) or list(scores)
    return [i for _, i in sorted(zip(keys, found.ids, strict=True), key=lambda pair: -pair[0])]


def rank_metrics(rankings: Sequence[Sequence[int]], golds: Sequence[int], k: int = TOP_K) -> dict[str, float]:
    r1 = mrr = hit = 0.0
    for ranking, gold in zip(rankings, golds, strict=True):
        if gold in ranking:
            rank = ranking.index(gold) + 1
            hit += 1
            r1 += rank == 1
            mrr += 1 / rank if rank <= 10 else 0.0
    n = len(golds) or 1
    return {"r@1": round(r1 / n, 4), "mrr@10": round(mrr / n, 4), f"r@{k}": round(hit / n, 4)}
