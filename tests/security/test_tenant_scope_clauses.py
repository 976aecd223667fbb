"""Tenants told apart by the caller's own query clauses, over HTTP: a ``match`` on ``org``
(whatever its text, the question's included) and a ``should`` that ``minimum_should_match``
makes required bind answerbox's own searches, and query expansion never lets a document in
that the caller's query kept out. The same query sent straight to OpenSearch returns only
tenant A; so must answerbox, everywhere in its response."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index
from tests.support.scripted_llm import ScriptedLLM

QUESTION = "capital of Germany"
DOCS = [
    {
        "_id": "a1",
        "org": "Acme Corp",
        "tenant": "A",
        "text": "Bonn was the seat of government of West Germany until 1990.",
    },
    {
        "_id": "b1",
        "org": "Bank of Berlin",
        "tenant": "B",
        "text": "Berlin is the capital of Germany. Acme Corp knows the secret plan: merger on May 5.",
    },
]
MAPPINGS = {"properties": {"org": {"type": "text"}, "tenant": {"type": "keyword"}, "text": {"type": "text"}}}
ORG = {"match": {"org": {"query": "Acme Corp", "operator": "and"}}}
TEXT = {"match": {"text": QUESTION}}
TENANT = {"term": {"tenant": "A"}}
# Every hit judged ambiguous, and an Ambiguous search searches again even before the reader,
# so the corrective search always runs, with the question's own words, and its hits are
# refined into knowledge.
CRAG = {
    "response_processors": [
        {
            "retrieval_evaluator": {
                "text_fields": ["text"],
                "upper": 1.0,
                "lower": -1.0,
                "ambiguous": "refine+corrective_search",
                "corrective": {"size": 5, "keywords": "question"},
            }
        },
        {"cited_answer": {"size": 5, "mode": "extractive"}},
    ]
}
QUERIES = {
    # Without llm_question the question is the org's text, the first text clause.
    "org_then_text": {"bool": {"must": [ORG, TEXT]}},
    "org_then_optional_text": {"bool": {"must": [ORG], "should": [TEXT]}},
    "should_both_by_count": {"bool": {"should": [TEXT, TENANT], "minimum_should_match": 2}},
    "should_both_by_percent": {"bool": {"should": [TEXT, TENANT], "minimum_should_match": "100%"}},
}


@pytest.fixture
def shared(opensearch: OpenSearch) -> None:
    bulk_index(opensearch, "shared", [dict(d) for d in DOCS], MAPPINGS)


def _only_tenant_a(client: httpx.Client, url: str, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post(f"{url}/shared/_search", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    assert [hit["_id"] for hit in result["hits"]["hits"]] == ["a1"]
    assert '"b1"' not in response.text
    assert "Berlin" not in response.text
    assert "secret plan" not in response.text
    return result


@pytest.mark.parametrize("query", QUERIES.values(), ids=QUERIES.keys())
def test_the_corrective_search_keeps_the_callers_clauses(
    shared: None, make_answerbox: AnswerboxFactory, osmem_url: str, client: httpx.Client, query: dict[str, Any]
) -> None:
    _only_tenant_a(client, osmem_url, {"query": query})
    result = _only_tenant_a(client, make_answerbox(), {"query": query, "search_pipeline": CRAG})
    retrieval = result["ext"]["answerbox"]["retrieval"]
    assert retrieval["corrective"]["keywords"], "the corrective search ran"


@pytest.mark.parametrize("llm_question", [None, QUESTION], ids=["question_from_the_org", "llm_question"])
def test_query_expansion_never_lets_in_what_the_callers_query_kept_out(
    shared: None,
    make_answerbox: AnswerboxFactory,
    scripted_llm: tuple[ScriptedLLM, str],
    osmem_url: str,
    client: httpx.Client,
    llm_question: str | None,
) -> None:
    llm, llm_url = scripted_llm
    # Shares "of" with tenant B's org, and nothing with tenant A's.
    llm.replies = ["the seat of government"]
    query = {"bool": {"must": [ORG, TEXT]}}
    _only_tenant_a(client, osmem_url, {"query": query})
    ext = {"ext": {"generative_qa_parameters": {"llm_question": llm_question}}} if llm_question else {}
    pipeline: dict[str, Any] = {"request_processors": [{"llm_query_expansion": {}}]}
    url = make_answerbox(llm={"base_url": llm_url, "model": "scripted"})
    result = _only_tenant_a(client, url, {"query": query, "search_pipeline": pipeline, **ext})
    assert result["ext"]["answerbox"]["query_expansion"]["expansion"] == "the seat of government"
    assert len(llm.calls) == 1
