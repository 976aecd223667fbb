"""Proxy overhead: the same searches sent to osmem-server directly and through answerbox, in one run.

    python bench/proxy_overhead.py [--requests 400] [--concurrency 1 16]

Starts osmem-server with the sample corpus and `answerbox serve` (its own process, so the
load generator does not share its interpreter), then for each concurrency level sends the
same match queries (questions of the sample corpus) both ways, interleaving rounds, and prints
p50/p99 latency and throughput with answerbox/direct ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
from osmem_server import OsmemServer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from answerbox.embedded import SAMPLE_INDEX, load_sample_corpus, wait_until_up

from bench.harness import free_port


def _queries(n: int) -> list[dict[str, object]]:
    lines = (ROOT / "deploy" / "embedded" / "questions.jsonl").read_text().splitlines()[:n]
    return [{"size": 10, "query": {"match": {"text": json.loads(line)["question"]}}} for line in lines]


async def _run(base: str, queries: list[dict[str, object]], concurrency: int) -> tuple[list[float], float]:
    latencies: list[float] = []
    pending = iter(queries)
    async with httpx.AsyncClient(base_url=base, timeout=30, limits=httpx.Limits(max_connections=concurrency)) as client:

        async def worker() -> None:
            for query in pending:
                started = time.perf_counter()
                response = await client.post(f"/{SAMPLE_INDEX}/_search", json=query)
                latencies.append((time.perf_counter() - started) * 1000)
                response.raise_for_status()

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    return latencies, len(queries) / elapsed


def _p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    args = parser.parse_args()
    queries = _queries(args.requests)
    with OsmemServer.start(japanese=False) as osmem:
        load_sample_corpus(osmem.url)
        port = free_port()
        env = {**os.environ, "ANSWERBOX_OPENSEARCH__URL": osmem.url, "ANSWERBOX_PORT": str(port)}
        # Popen only starts the server; nothing waits on it here.
        proxy = subprocess.Popen(  # noqa: ASYNC220
            [sys.executable, "-m", "answerbox.cli", "serve", "--log-level", "warning"],
            env=env,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            wait_until_up(f"{base}/", proxy, 30)
            await _run(base, queries[:50], 4)  # warm both paths' connection pools and caches
            await _run(osmem.url, queries[:50], 4)
            print(f"{len(queries)} match queries x {args.rounds} rounds per path, sample corpus, osmem-server")
            print(f"{'conc':>4} {'path':>9} {'p50 ms':>8} {'p99 ms':>8} {'req/s':>8}")
            for concurrency in args.concurrency:
                results: dict[str, tuple[list[float], list[float]]] = {"direct": ([], []), "answerbox": ([], [])}
                for _ in range(args.rounds):
                    for name, base_url in (("direct", osmem.url), ("answerbox", base)):
                        latencies, throughput = await _run(base_url, queries, concurrency)
                        results[name][0].extend(latencies)
                        results[name][1].append(throughput)
                row = {}
                for name, (latencies, throughputs) in results.items():
                    row[name] = (_p(latencies, 50), _p(latencies, 99), statistics.median(throughputs))
                    print(f"{concurrency:>4} {name:>9} {row[name][0]:8.2f} {row[name][1]:8.2f} {row[name][2]:8.1f}")
                (d50, d99, dtp), (a50, a99, atp) = row["direct"], row["answerbox"]
                print(
                    f"{concurrency:>4} {'ratio':>9} p50 {a50 / d50:.2f}x (+{a50 - d50:.2f} ms)  p99 {a99 / d99:.2f}x  "
                    f"throughput {atp / dtp:.2f}x direct"
                )
        finally:
            proxy.terminate()
            proxy.wait(10)


if __name__ == "__main__":
    asyncio.run(main())
