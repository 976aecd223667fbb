"""Load is admitted, not absorbed: past the run limit a search is refused at once with
OpenSearch's 429, a caller who floods is refused before the others, the LLM's slots and one
request's LLM calls are bounded, and a waiting LLM call degrades instead of queueing."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import httpx
import pytest
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index
from tests.support.scripted_llm import ScriptedLLM

EXPAND = {
    "request_processors": [{"llm_query_expansion": {"timeout_s": 5}}],
    "response_processors": [{"cited_answer": {"size": 2, "mode": "extractive"}}],
}
BODY = {"query": {"match": {"body": "spice"}}}


def caller(name: str) -> dict[str, str]:
    return {"authorization": "Basic " + base64.b64encode(f"{name}:x".encode()).decode()}


@pytest.fixture
def slow_llm(scripted_llm: tuple[ScriptedLLM, str], opensearch: OpenSearch) -> tuple[ScriptedLLM, str]:
    bulk_index(opensearch, "books", [{"_id": "dune", "body": "Spice is mined on Arrakis."}])
    llm, url = scripted_llm
    llm.delay_s, llm.replies = 1.0, ["spice melange arrakis"]
    return llm, url


async def _searches(url: str, callers: list[str], pipeline: dict[str, Any] = EXPAND) -> list[httpx.Response]:
    async with httpx.AsyncClient(timeout=30) as http:
        return list(
            await asyncio.gather(
                *(
                    http.post(f"{url}/books/_search", json={**BODY, "search_pipeline": pipeline}, headers=caller(c))
                    for c in callers
                )
            )
        )


async def _until_running(http: httpx.AsyncClient, url: str, runs: int) -> None:
    """Wait (briefly, by polling the stats) until ``runs`` request phases are running."""
    for _ in range(200):
        stats = (await http.get(f"{url}/_answerbox/stats/search_pipeline")).json()
        (node,) = stats["nodes"].values()
        if node["search_pipeline"]["total_request"]["current"] >= runs:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{runs} runs never ran at once")


def _rejected(response: httpx.Response) -> bool:
    if response.status_code != 429:
        return False
    error = response.json()
    assert error["status"] == 429
    assert error["error"]["type"] == "rejected_execution_exception"
    return bool(error["error"]["root_cause"][0]["type"] == "rejected_execution_exception")


def test_past_the_run_limit_a_search_is_refused_at_once(
    make_answerbox: AnswerboxFactory, slow_llm: tuple[ScriptedLLM, str]
) -> None:
    url = make_answerbox(llm={"base_url": slow_llm[1]}, limits={"max_concurrent_runs": 2, "inline_overrides": True})
    responses = asyncio.run(_searches(url, ["a", "b", "c", "d"]))
    assert sorted(r.status_code for r in responses) == [200, 200, 429, 429]
    assert sum(_rejected(r) for r in responses) == 2
    assert "limits.max_concurrent_runs" in next(r for r in responses if r.status_code == 429).text
    # Admission is released when a run ends: the next ones are admitted.
    assert [r.status_code for r in asyncio.run(_searches(url, ["a", "b"]))] == [200, 200]


def test_a_caller_who_floods_is_refused_before_the_others(
    make_answerbox: AnswerboxFactory, slow_llm: tuple[ScriptedLLM, str]
) -> None:
    url = make_answerbox(llm={"base_url": slow_llm[1]}, limits={"max_runs_per_caller": 2})
    responses = asyncio.run(_searches(url, ["flood"] * 5 + ["calm"]))
    flood, calm = responses[:5], responses[5]
    assert sorted(r.status_code for r in flood) == [200, 200, 429, 429, 429]
    assert calm.status_code == 200
    assert "limits.max_runs_per_caller" in next(r for r in flood if r.status_code == 429).text


def test_an_msearch_counts_each_pipeline_line(
    make_answerbox: AnswerboxFactory, slow_llm: tuple[ScriptedLLM, str], client: httpx.Client
) -> None:
    url = make_answerbox(llm={"base_url": slow_llm[1]}, limits={"max_runs_per_caller": 3})

    async def both() -> list[httpx.Response]:
        lines = "".join(json.dumps(x) + "\n" for _ in range(3) for x in ({}, {**BODY, "search_pipeline": EXPAND}))
        async with httpx.AsyncClient(timeout=30) as http:
            headers = {**caller("a"), "content-type": "application/x-ndjson"}
            msearch = asyncio.create_task(http.post(f"{url}/books/_msearch", content=lines, headers=headers))
            await _until_running(http, url, 3)
            search = await http.post(
                f"{url}/books/_search", json={**BODY, "search_pipeline": EXPAND}, headers=caller("a")
            )
            return [await msearch, search]

    msearch, search = asyncio.run(both())
    assert msearch.status_code == 200
    assert len(msearch.json()["responses"]) == 3
    assert _rejected(search)


def test_a_call_that_waits_past_its_time_for_an_llm_slot_degrades(
    make_answerbox: AnswerboxFactory, slow_llm: tuple[ScriptedLLM, str]
) -> None:
    llm, llm_url = slow_llm
    url = make_answerbox(llm={"base_url": llm_url, "max_concurrent": 1}, limits={"inline_overrides": True})
    patient = {**EXPAND, "request_processors": [{"llm_query_expansion": {"timeout_s": 5}}]}
    hurried = {
        **EXPAND,
        "request_processors": [{"llm_query_expansion": {"timeout_s": 0.5, "prompt": "Keywords: {{ query }}"}}],
    }

    async def both() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=30) as http:
            first = asyncio.create_task(
                http.post(f"{url}/books/_search", json={**BODY, "search_pipeline": patient}, headers=caller("a"))
            )
            for _ in range(500):  # until the first call holds the one slot (for the LLM's 1 s)
                if llm.calls:
                    break
                await asyncio.sleep(0.01)
            second = await http.post(
                f"{url}/books/_search", json={**BODY, "search_pipeline": hurried}, headers=caller("b")
            )
            return [await first, second]

    first, second = asyncio.run(both())
    assert first.json()["ext"]["answerbox"]["query_expansion"]["expansion"] == "spice melange arrakis"
    # The second waited out its time for the slot and searched without an expansion, never
    # reaching the LLM.
    (warning,) = second.json()["ext"]["answerbox"]["warnings"]
    assert "searched with the original query" in warning
    assert second.json()["hits"]["hits"]
    assert len(llm.calls) == 1


def test_one_request_makes_at_most_its_llm_calls(
    make_answerbox: AnswerboxFactory, slow_llm: tuple[ScriptedLLM, str], client: httpx.Client
) -> None:
    llm, llm_url = slow_llm
    llm.delay_s = 0.0
    url = make_answerbox(llm={"base_url": llm_url}, limits={"max_llm_calls": 2})
    # Four different questions (identical ones would share one call).
    words = ["spice", "sand", "water", "worm"]
    lines = "".join(
        json.dumps(x) + "\n" for w in words for x in ({}, {"query": {"match": {"body": w}}, "search_pipeline": EXPAND})
    )
    response = client.post(f"{url}/books/_msearch", content=lines, headers={"content-type": "application/x-ndjson"})
    assert response.status_code == 200
    reports = [r["ext"]["answerbox"] for r in response.json()["responses"]]
    assert len(llm.calls) == 2
    assert (
        sum(any("made its 2 LLM calls (limits.max_llm_calls)" in w for w in report["warnings"]) for report in reports)
        == 2
    )
