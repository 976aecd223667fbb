"""What one caller may ask for is bounded by ``limits`` (and ``llm.allowed_models``); past a
bound the answer is an OpenSearch-shaped 400 and nothing runs."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index

EXPAND = {"llm_query_expansion": {"max_tokens": 64}}


def _assert_400(response: httpx.Response, *words: str) -> None:
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["status"] == 400
    assert error["error"]["root_cause"][0]["type"] == error["error"]["type"]
    assert all(word in error["error"]["reason"] for word in words), error["error"]["reason"]


@pytest.fixture
def url(make_answerbox: AnswerboxFactory, scripted_llm: Any) -> str:
    _, llm_url = scripted_llm
    return make_answerbox(
        llm={"base_url": llm_url, "allowed_models": ["small"]},
        limits={
            "max_processors": 3,
            "max_msearch_searches": 2,
            "max_prompt_chars": 100,
            "max_context_size": 5,
            "max_llm_tokens": 128,
        },
    )


def test_processors_per_pipeline(url: str, client: httpx.Client) -> None:
    _assert_400(
        client.put(f"{url}/_search/pipeline/long", json={"request_processors": [EXPAND] * 4}), "limits.max_processors"
    )
    assert client.put(f"{url}/_search/pipeline/short", json={"request_processors": [EXPAND] * 3}).status_code == 200


@pytest.mark.parametrize("processor", [
    {"llm_query_expansion": {"max_tokens": 4096}},
    {"cited_answer": {"max_tokens": 4096}},
    {"chain_of_query": {"max_tokens": 4096}},
    {"retrieval_evaluator": {"corrective": {"max_tokens": 200}}},
])  # fmt: skip
def test_llm_tokens_per_call(url: str, client: httpx.Client, processor: dict[str, Any]) -> None:
    phase = "request_processors" if "llm_query_expansion" in processor else "response_processors"
    _assert_400(client.put(f"{url}/_search/pipeline/costly", json={phase: [processor]}), "limits.max_llm_tokens")
    _assert_400(
        client.post(f"{url}/any/_search", json={"search_pipeline": {phase: [processor]}}), "limits.max_llm_tokens"
    )


@pytest.mark.parametrize(("qa", "words"), [
    ({"llm_model": "gpt-huge"}, ["llm_model [gpt-huge]", "llm.allowed_models"]),
    ({"system_prompt": "x" * 101}, ["system_prompt", "limits.max_prompt_chars"]),
    ({"user_instructions": "x" * 101}, ["user_instructions", "limits.max_prompt_chars"]),
    ({"llm_question": "x" * 101}, ["llm_question", "limits.max_prompt_chars"]),
    ({"context_size": 6}, ["context_size", "limits.max_context_size"]),
])  # fmt: skip
def test_generative_qa_parameters(url: str, client: httpx.Client, qa: dict[str, Any], words: list[str]) -> None:
    body = {"search_pipeline": {"response_processors": [{"cited_answer": {}}]}, "ext": {"generative_qa_parameters": qa}}
    _assert_400(client.post(f"{url}/any/_search", json=body), *words)


def test_allowed_models_and_the_configured_one_may_be_named(url: str, client: httpx.Client) -> None:
    for model in ("small", "smollm2"):
        body = {
            "search_pipeline": {"response_processors": [{"cited_answer": {}}]},
            "ext": {"generative_qa_parameters": {"llm_model": model}},
        }
        # Past answerbox's check, the search reaches OpenSearch, which has no index "any".
        response = client.post(f"{url}/any/_search", json=body)
        assert response.status_code == 404, response.text
        assert response.json()["error"]["type"] == "index_not_found_exception", response.text


def test_searches_per_msearch(url: str, client: httpx.Client) -> None:
    line = [
        {"index": "any", "search_pipeline": {"response_processors": [{"cited_answer": {}}]}},
        {"query": {"match_all": {}}},
    ]
    payload = "".join(json.dumps(part) + "\n" for part in line * 3)
    _assert_400(
        client.post(f"{url}/_msearch", content=payload, headers={"content-type": "application/x-ndjson"}),
        "limits.max_msearch_searches",
    )


def test_invented_ids_tags_and_index_names_do_not_grow_stats(
    url: str, client: httpx.Client, opensearch: OpenSearch
) -> None:
    """A search's own pipeline is counted by processor type: 300 invented tags add no label."""
    bulk_index(opensearch, "docs", [{"_id": "1", "text": "Spice is mined on Arrakis."}])

    def search(i: int) -> None:
        pipeline = {"response_processors": [{"cited_answer": {"tag": f"t{i}", "check_citations": False}}]}
        assert client.post(f"{url}/docs/_search", json={"search_pipeline": pipeline}).status_code == 200
        client.post(f"{url}/index-{i}/_search?search_pipeline=missing-{i}", json={})

    search(-1)
    before = len(client.get(f"{url}/metrics").content)
    for i in range(300):
        search(i)
    stats = client.get(f"{url}/_answerbox/stats/search_pipeline").json()
    (node,) = stats["nodes"].values()
    pipelines = node["search_pipeline"]["pipelines"]
    assert list(pipelines) == ["_ad_hoc_pipeline"]
    assert [name for entry in pipelines["_ad_hoc_pipeline"]["response_processors"] for name in entry] == [
        "cited_answer"
    ]
    metrics = client.get(f"{url}/metrics").text
    assert set(re.findall(r'processor="([^"]+)"', metrics)) == {"cited_answer"}
    assert len(metrics) - before < 1000  # counts grow by digits, never by labels
