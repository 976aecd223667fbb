"""What one caller may ask for is bounded by ``limits`` (and ``llm.allowed_models``); past a
bound the answer is an OpenSearch-shaped 400 and nothing runs. In-process, against the fake
cluster and the scripted LLM."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support.scripted_llm import ScriptedLLM
from tests.unit.asgi import in_process, opensearch_error
from tests.unit.fake_opensearch import FakeOpenSearch

EXPAND = {"llm_query_expansion": {"max_tokens": 64}}
INVENTED = 100


@pytest.fixture
def cluster() -> FakeOpenSearch:
    cluster = FakeOpenSearch()
    cluster.index_docs("docs", [{"_id": "1", "text": "Spice is mined on Arrakis."}])
    return cluster


@pytest.fixture
async def client(cluster: FakeOpenSearch) -> AsyncIterator[httpx.AsyncClient]:
    async with in_process(
        cluster=cluster,
        llm_app=ScriptedLLM().app(),
        llm={"allowed_models": ["small"]},
        limits={
            "max_processors": 3,
            "max_msearch_searches": 2,
            "max_prompt_chars": 100,
            "max_context_size": 5,
            "max_llm_tokens": 128,
        },
    ) as client:
        yield client


def _refused(response: httpx.Response, *words: str) -> None:
    reason = opensearch_error(response, 400, "illegal_argument_exception")
    assert all(word in reason for word in words), reason


async def test_processors_per_pipeline(client: httpx.AsyncClient) -> None:
    _refused(
        await client.put("/_search/pipeline/long", json={"request_processors": [EXPAND] * 4}), "limits.max_processors"
    )
    short = await client.put("/_search/pipeline/short", json={"request_processors": [EXPAND] * 3})
    assert (short.status_code, short.json()) == (200, {"acknowledged": True})
    assert list((await client.get("/_search/pipeline")).json()) == ["short"]


@pytest.mark.parametrize("processor", [
    {"llm_query_expansion": {"max_tokens": 4096}},
    {"cited_answer": {"max_tokens": 4096}},
    {"chain_of_query": {"max_tokens": 4096}},
    {"retrieval_evaluator": {"corrective": {"max_tokens": 200}}},
])  # fmt: skip
async def test_llm_tokens_per_call(
    client: httpx.AsyncClient, cluster: FakeOpenSearch, processor: dict[str, Any]
) -> None:
    phase = "request_processors" if "llm_query_expansion" in processor else "response_processors"
    _refused(await client.put("/_search/pipeline/costly", json={phase: [processor]}), "limits.max_llm_tokens")
    _refused(
        await client.post("/docs/_search", json={"search_pipeline": {phase: [processor]}}), "limits.max_llm_tokens"
    )
    assert cluster.sent("/docs/*") == []


@pytest.mark.parametrize(("qa", "words"), [
    ({"llm_model": "gpt-huge"}, ["llm_model [gpt-huge]", "llm.allowed_models"]),
    ({"system_prompt": "x" * 101}, ["system_prompt", "limits.max_prompt_chars"]),
    ({"user_instructions": "x" * 101}, ["user_instructions", "limits.max_prompt_chars"]),
    ({"llm_question": "x" * 101}, ["llm_question", "limits.max_prompt_chars"]),
    ({"context_size": 6}, ["context_size", "limits.max_context_size"]),
])  # fmt: skip
async def test_generative_qa_parameters(
    client: httpx.AsyncClient, cluster: FakeOpenSearch, qa: dict[str, Any], words: list[str]
) -> None:
    body = {"search_pipeline": {"response_processors": [{"cited_answer": {}}]}, "ext": {"generative_qa_parameters": qa}}
    _refused(await client.post("/docs/_search", json=body), *words)
    assert cluster.sent("/docs/*") == []


@pytest.mark.parametrize("model", ["small", "smollm2"])
async def test_allowed_models_and_the_configured_one_may_be_named(client: httpx.AsyncClient, model: str) -> None:
    body = {
        "search_pipeline": {"response_processors": [{"cited_answer": {}}]},
        "ext": {"generative_qa_parameters": {"llm_model": model}},
    }
    # Past answerbox's check, the search reaches OpenSearch, which has no index "any".
    response = await client.post("/any/_search", json=body)
    assert opensearch_error(response, 404, "index_not_found_exception") == "no such index [any]"


async def test_searches_per_msearch(client: httpx.AsyncClient, cluster: FakeOpenSearch) -> None:
    line = [
        {"index": "docs", "search_pipeline": {"response_processors": [{"cited_answer": {}}]}},
        {"query": {"match_all": {}}},
    ]
    payload = "".join(json.dumps(part) + "\n" for part in line * 3)
    response = await client.post("/_msearch", content=payload, headers={"content-type": "application/x-ndjson"})
    _refused(response, "limits.max_msearch_searches")
    assert cluster.sent("*_msearch") == []


async def test_invented_ids_tags_and_index_names_do_not_grow_stats(client: httpx.AsyncClient) -> None:
    """A search's own pipeline is counted by processor type: invented tags add no label."""

    async def search(i: int) -> None:
        pipeline = {"response_processors": [{"cited_answer": {"tag": f"t{i}", "check_citations": False}}]}
        answered = await client.post("/docs/_search", json={"search_pipeline": pipeline})
        assert answered.status_code == 200, answered.text
        # No such pipeline: left to OpenSearch (by the passthrough, unreachable here).
        missing = await client.post(f"/index-{i}/_search?search_pipeline=missing-{i}", json={})
        opensearch_error(missing, 502, "connect_exception")

    await search(-1)
    before = len((await client.get("/metrics")).content)
    for i in range(INVENTED):
        await search(i)
    stats = (await client.get("/_answerbox/stats/search_pipeline")).json()
    (node,) = stats["nodes"].values()
    pipelines = node["search_pipeline"]["pipelines"]
    assert list(pipelines) == ["_ad_hoc_pipeline"]
    assert [name for entry in pipelines["_ad_hoc_pipeline"]["response_processors"] for name in entry] == [
        "cited_answer"
    ]
    metrics = (await client.get("/metrics")).text
    assert set(re.findall(r'processor="([^"]+)"', metrics)) == {"cited_answer"}
    assert len(metrics) - before < 1000  # counts grow by digits, never by labels
