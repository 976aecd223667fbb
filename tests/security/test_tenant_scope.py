"""Tenants in one index: a processor's own searches keep the caller's tenant filter wherever
in the query it stands (inside function_score, constant_score, dis_max, boosting or a nested
bool), and another tenant's text never reaches the response."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index
from tests.support.recording_proxy import RecordingProxy
from tests.support.servers import serve

QUESTION = "capital of Germany"
DOCS = [
    {"_id": "a1", "tenant": "A", "text": "Bonn was the seat of government of West Germany until 1990."},
    {"_id": "b1", "tenant": "B", "text": "Berlin is the capital of Germany. The secret plan: merger on May 5."},
]
TEXT = {"match": {"text": QUESTION}}
TENANT = {"term": {"tenant": "A"}}
SCOPED = {"bool": {"must": [TEXT], "filter": [TENANT]}}
QUERIES = {
    "function_score": {"function_score": {"query": SCOPED, "functions": [{"weight": 2}]}},
    "constant_score": {"constant_score": {"filter": SCOPED}},
    "dis_max": {"dis_max": {"queries": [SCOPED]}},
    "boosting": {"boosting": {"positive": SCOPED, "negative": {"term": {"tenant": "C"}}, "negative_boost": 0.5}},
    "nested_bool": {"bool": {"must": [{"bool": {"must": [SCOPED]}}]}},
}
# CRAG judges every hit incorrect, so the corrective search always runs; the keywords are
# the question's own (no LLM).
PIPELINE = {
    "response_processors": [
        {"retrieval_evaluator": {"upper": 1.0, "lower": 1.0, "corrective": {"size": 5}}},
        {"chain_of_query": {"text_field": "text", "r_max": 1, "skip_llm_above": 1}},
        {"cited_answer": {"size": 5, "mode": "extractive"}},
    ]
}


@dataclass
class Cluster:
    url: str
    recorder: RecordingProxy


@pytest.fixture
def cluster(opensearch: OpenSearch, make_answerbox: AnswerboxFactory, osmem_url: str) -> Iterator[Cluster]:
    properties = {"text": {"type": "text"}, "tenant": {"type": "keyword"}}
    bulk_index(opensearch, "shared", [dict(d) for d in DOCS], {"properties": properties})
    recorder = RecordingProxy(osmem_url)
    with serve(recorder.app()) as proxied:
        yield Cluster(make_answerbox(opensearch={"url": proxied}), recorder)


@pytest.mark.parametrize("query", QUERIES.values(), ids=QUERIES.keys())
def test_another_tenants_documents_never_come_back(
    cluster: Cluster, client: httpx.Client, query: dict[str, Any]
) -> None:
    body = {
        "query": query,
        "search_pipeline": PIPELINE,
        "ext": {"generative_qa_parameters": {"llm_question": QUESTION}},
    }
    response = client.post(f"{cluster.url}/shared/_search", json=body)
    assert response.status_code == 200, response.text
    result = response.json()
    assert [hit["_id"] for hit in result["hits"]["hits"]] == ["a1"]
    assert "Berlin" not in response.text
    assert "secret plan" not in response.text
    # Every search answerbox sent on its own (after the caller's) carried the tenant filter.
    own = [r.body.decode() for r in cluster.recorder.requests if "_search" in r.path or "_msearch" in r.path][1:]
    assert own, "the corrective search and the chain's searches ran"
    assert all(
        '{"term": {"tenant": "A"}}' in json.dumps(json.loads(line))
        for body in own
        for line in body.splitlines()
        if "query" in line
    )


def test_a_restriction_no_filter_can_carry_skips_the_processors_searches(
    cluster: Cluster, client: httpx.Client
) -> None:
    query = {"function_score": {"query": SCOPED, "min_score": 0.0001}}
    response = client.post(f"{cluster.url}/shared/_search", json={"query": query, "search_pipeline": PIPELINE})
    assert response.status_code == 200, response.text
    result = response.json()
    assert [hit["_id"] for hit in result["hits"]["hits"]] == ["a1"]
    searched = [
        r
        for r in cluster.recorder.requests
        if ("_search" in r.path or "_msearch" in r.path) and not r.path.startswith("/.answerbox")
    ]
    assert len(searched) == 1
    warnings = " ".join(result["ext"]["answerbox"]["warnings"])
    assert "min_score" in warnings
    assert "Berlin" not in response.text
