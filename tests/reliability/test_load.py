"""64 concurrent pipeline searches with a slow scripted LLM and one pathological document in
the index: every search succeeds with its hits, and the event loop never stalls: a poller
hitting a cheap endpoint throughout is answered within 500 ms, all but one poll in ten.

answerbox runs in its own process here: in the test's process it would share one interpreter
lock with the test's own client, and the poller would time the test, not the server. A
blocking call on the loop, as the quadratic regexes were, shows as seconds on every search, so
on most polls; one slow poll is the 2-core machine scheduling something else (CI once saw 509 ms)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
from opensearchpy import OpenSearch

from tests.conftest import bulk_index
from tests.support.servers import serve_answerbox_process

SEARCHES = 64
STALL_MS = 500
SLOW_POLL_SHARE = 0.1
TOPICS = ["spice", "sand", "water", "desert", "planet", "worm", "house", "emperor"]
DOCS = [
    {"_id": f"d{i}", "body": f"The {t} of Arrakis is told in chapter {i}. It matters to the {t} trade."}
    for i, t in enumerate(TOPICS * 3)
]
DOTS = {"_id": "dots", "body": "spice sand water desert planet worm house emperor" + "." * 60_000}
PIPELINE = {
    "request_processors": [{"llm_query_expansion": {"timeout_s": 5}}],
    "response_processors": [
        {"retrieval_evaluator": {"text_fields": ["body"], "top_n": 5, "corrective": None}},
        {"cited_answer": {"size": 3, "timeout_s": 5}},
    ],
}


async def _poll(url: str, stop: asyncio.Event) -> list[float]:
    """How long the cheap endpoint took to answer, in ms, each time it was asked while the searches ran."""
    times: list[float] = []
    async with httpx.AsyncClient(timeout=30) as http:
        while not stop.is_set():
            started = time.perf_counter()
            assert (await http.get(f"{url}/_answerbox/stats/search_pipeline")).status_code == 200
            times.append((time.perf_counter() - started) * 1000)
            await asyncio.sleep(0.05)
    return times


async def _burst(url: str) -> tuple[list[httpx.Response], list[float]]:
    stop = asyncio.Event()
    poller = asyncio.create_task(_poll(url, stop))
    async with httpx.AsyncClient(timeout=120) as http:
        searches = [
            http.post(
                f"{url}/docs/_search?search_pipeline=load",
                json={"query": {"match": {"body": f"Where is the {TOPICS[i % 8]} traded?"}}},
            )
            for i in range(SEARCHES)
        ]
        responses = await asyncio.gather(*searches)
    stop.set()
    return responses, await poller


def test_a_burst_with_a_slow_llm_and_a_pathological_document(
    osmem_url: str, opensearch: OpenSearch, scripted_llm: Any, client: httpx.Client, tmp_path: Path
) -> None:
    llm, llm_url = scripted_llm
    llm.delay_s, llm.replies = 1.0, ["The spice is traded on Arrakis [1]."]
    bulk_index(opensearch, "docs", [*[dict(d) for d in DOCS], dict(DOTS)])
    settings = {
        "opensearch": {"url": osmem_url},
        "llm": {"base_url": llm_url, "timeout_s": 10},
        "limits": {"processor_timeout_s": 60, "pipeline_budget_s": 60},
    }
    with serve_answerbox_process(settings, tmp_path) as url:
        assert client.put(f"{url}/_search/pipeline/load", json=PIPELINE).status_code == 200
        responses, poll_ms = asyncio.run(_burst(url))
    failures = [r.text[:300] for r in responses if r.status_code != 200]
    assert not failures, failures[:3]
    assert all(r.json()["hits"]["hits"] and r.json()["ext"]["answerbox"]["answer"] for r in responses)
    slow = sorted(ms for ms in poll_ms if ms > STALL_MS)
    assert len(slow) <= SLOW_POLL_SHARE * len(poll_ms), (
        f"the event loop stalled on {len(slow)} of {len(poll_ms)} polls: {slow[-5:]} ms"
    )
