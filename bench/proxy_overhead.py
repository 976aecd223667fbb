"""Proxy overhead: the same searches sent to osmem-server directly and through answerbox, in one run.

    python bench/proxy_overhead.py [--requests 400] [--concurrency 1 16] [--baseline-rev f5fc235 44e4c7a]
        [--filter-ids N] [--floor] [--documents | --msearch N]

Starts osmem-server with the sample corpus and `answerbox serve` (its own process, so the
load generator does not share its interpreter), and one more for each ``--baseline-rev`` (the
repository at that revision, from a temporary worktree). For each concurrency level it sends
the same match queries (questions of the sample corpus) every way, interleaving rounds, and
prints p50/p99 latency and throughput, each answerbox's overhead over direct and its
throughput as a ratio of direct's, and the CPU time its server's process spent a request
(median of the rounds; less noisy than latency on a shared machine). ``--filter-ids N`` makes
each a larger body: a ``terms`` filter of N ids (every sample document's, then ones no document
has), as an access-control filter would be, so the hits stay the same. ``--floor`` serves
``bench/floor_proxy.py`` too: a bare proxy on answerbox's own HTTP client, so answerbox's CPU
less the floor's is what its own layers (Starlette, routing, the body and pipeline checks) cost.
``--documents`` sends ``GET /{index}/_doc/{id}`` of the sample documents instead: requests
only the passthrough's catch-all takes (the fast lane's other kind). ``--msearch N`` sends each N
of the match queries as one ``_msearch`` (NDJSON, no pipeline named): what OpenSearch Dashboards
sends.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import httpx
from osmem_server import OsmemServer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from answerbox.ops.embedded import SAMPLE_INDEX, load_sample_corpus

from bench.harness import answerbox_serve, checkout, floor_serve

# One request the bench sends: method, path, body (None: none) and its content type.
Call = tuple[str, str, bytes | None, str]
_JSON = "application/json"


def _searches(n: int, filter_ids: int) -> list[Call]:
    embedded = ROOT / "deploy" / "embedded"
    lines = (embedded / "questions.jsonl").read_text().splitlines()[:n]
    queries: list[dict[str, object]] = [{"match": {"text": json.loads(line)["question"]}} for line in lines]
    if filter_ids:
        ids = [json.loads(line)["_id"] for line in (embedded / "corpus.jsonl").read_text().splitlines()]
        ids += [f"absent-{i}" for i in range(filter_ids - len(ids))]
        queries = [{"bool": {"must": [query], "filter": [{"terms": {"_id": ids}}]}} for query in queries]
    return [("POST", f"/{SAMPLE_INDEX}/_search", json.dumps({"size": 10, "query": q}).encode(), _JSON) for q in queries]


def _msearches(searches: list[Call], per_request: int) -> list[Call]:
    """Each ``per_request`` of ``searches`` as one ``_msearch`` of the same index."""
    lines = [b"{}\n" + body + b"\n" for _, _, body, _ in searches if body is not None]
    grouped = [b"".join(lines[i : i + per_request]) for i in range(0, len(lines), per_request)]
    return [("POST", f"/{SAMPLE_INDEX}/_msearch", body, "application/x-ndjson") for body in grouped]


def _documents(n: int) -> list[Call]:
    """``GET /{index}/_doc/{id}`` of the sample documents, round and round: the passthrough's own."""
    lines = (ROOT / "deploy" / "embedded" / "corpus.jsonl").read_text().splitlines()
    ids = [json.loads(line)["_id"] for line in lines]
    return [("GET", f"/{SAMPLE_INDEX}/_doc/{ids[i % len(ids)]}", None, _JSON) for i in range(n)]


async def _run(base: str, calls: list[Call], concurrency: int) -> tuple[list[float], float]:
    latencies: list[float] = []
    pending = iter(calls)
    async with httpx.AsyncClient(base_url=base, timeout=30, limits=httpx.Limits(max_connections=concurrency)) as client:

        async def worker() -> None:
            for method, path, body, content_type in pending:
                started = time.perf_counter()
                response = await client.request(method, path, content=body, headers={"content-type": content_type})
                latencies.append((time.perf_counter() - started) * 1000)
                response.raise_for_status()

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    return latencies, len(calls) / elapsed


def _p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--baseline-rev", nargs="*", default=[], help="earlier revisions served beside this one")
    parser.add_argument("--filter-ids", type=int, default=0, help="a terms filter of this many ids in each search")
    parser.add_argument("--floor", action="store_true", help="also a bare proxy on answerbox's client (floor_proxy.py)")
    kinds = parser.add_mutually_exclusive_group()
    kinds.add_argument("--documents", action="store_true", help="GET each sample document instead of searching")
    kinds.add_argument("--msearch", type=int, default=0, help="send each this many searches as one _msearch")
    args = parser.parse_args()
    queries = _documents(args.requests) if args.documents else _searches(args.requests, args.filter_ids)
    if args.msearch:
        queries = _msearches(queries, args.msearch)
    with ExitStack() as stack:
        osmem = stack.enter_context(OsmemServer.start(japanese=False))
        load_sample_corpus(osmem.url)
        served = {"answerbox": stack.enter_context(answerbox_serve(osmem.url, ROOT / "plugin"))}
        for revision in args.baseline_rev:
            tree = stack.enter_context(checkout(revision))
            served[revision] = stack.enter_context(answerbox_serve(osmem.url, tree / "plugin"))
        if args.floor:
            served["floor"] = stack.enter_context(floor_serve(osmem.url))
        paths = {"direct": osmem.url} | {name: server.url for name, server in served.items()}
        for base in paths.values():  # warm every path's connection pools and caches
            await _run(base, queries[:50], 4)
        filtered = f", each filtered by {args.filter_ids} ids" if args.filter_ids else ""
        kind = "document GETs" if args.documents else f"match queries{filtered}"
        if args.msearch:
            kind = f"_msearch requests of {args.msearch} {kind}"
        print(f"{len(queries)} {kind} x {args.rounds} rounds per path, sample corpus, osmem-server")
        print(f"{'conc':>4} {'path':>9} {'p50 ms':>8} {'p99 ms':>8} {'req/s':>8}")
        for concurrency in args.concurrency:
            results: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in paths}
            cpu_ms: dict[str, list[float]] = {name: [] for name in served}
            for _ in range(args.rounds):
                for name, base in paths.items():
                    before = served[name].cpu_s() if name in served else 0.0
                    latencies, throughput = await _run(base, queries, concurrency)
                    if name in served:
                        cpu_ms[name].append((served[name].cpu_s() - before) * 1000 / len(queries))
                    results[name][0].extend(latencies)
                    results[name][1].append(throughput)
            row = {}
            for name, (latencies, throughputs) in results.items():
                row[name] = (_p(latencies, 50), _p(latencies, 99), statistics.median(throughputs))
                print(f"{concurrency:>4} {name:>9} {row[name][0]:8.2f} {row[name][1]:8.2f} {row[name][2]:8.1f}")
            d50, d99, dtp = row["direct"]
            for name in list(paths)[1:]:
                a50, a99, atp = row[name]
                print(
                    f"{concurrency:>4} {name:>9} p50 {a50 / d50:.2f}x (+{a50 - d50:.2f} ms)  p99 {a99 / d99:.2f}x  "
                    f"throughput {atp / dtp:.2f}x direct  CPU {statistics.median(cpu_ms[name]):.3f} ms a request"
                )


if __name__ == "__main__":
    asyncio.run(main())
