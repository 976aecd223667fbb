"""``llm_query_expansion`` end to end: a stored pipeline shared by replicas through osmem-server's
cache index, and the real local LLM. What the processor does with a search (prompts, the query
it sends on, caches, fallbacks, config errors) is in ``tests/unit/processors/query_expansion``."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index, completions
from tests.support.recording_proxy import RecordingProxy
from tests.support.scripted_llm import ScriptedLLM

DOCS = [
    {"_id": "spice", "genre": "scifi", "year": 1965, "body": "Spice is mined on the desert planet Arrakis."},
    {"_id": "sand", "genre": "scifi", "year": 1970, "body": "Sand worms cross the desert planet at night."},
    {"_id": "dunes", "genre": "travel", "year": 1990, "body": "A guide to the desert dunes of Namibia."},
    {"_id": "car", "genre": "travel", "year": 2001, "body": "An automobile museum with vintage vehicles."},
    {"_id": "emma", "genre": "classic", "year": 1815, "body": "A comedy of manners in an English village."},
]
MAPPINGS = {"properties": {"genre": {"type": "keyword"}, "year": {"type": "integer"}, "body": {"type": "text"}}}
QUERY = "desert planet spice"


@pytest.fixture
def books(opensearch: OpenSearch) -> None:
    bulk_index(opensearch, "books", [dict(d) for d in DOCS], MAPPINGS)


def _pipeline(**config: Any) -> dict[str, Any]:
    return {"request_processors": [{"llm_query_expansion": config}]}


def _search(
    client: httpx.Client, url: str, body: dict[str, Any], headers: dict[str, str] | None = None, **config: Any
) -> dict[str, Any]:
    response = client.post(
        f"{url}/books/_search", json={**body, "search_pipeline": _pipeline(**config)}, headers=headers
    )
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def _ids(result: dict[str, Any]) -> list[str]:
    return [hit["_id"] for hit in result["hits"]["hits"]]


def test_the_shared_cache_serves_one_replicas_expansion_to_another(
    books: None,
    make_answerbox: AnswerboxFactory,
    scripted_llm: tuple[ScriptedLLM, str],
    client: httpx.Client,
    osmem_url: str,
) -> None:
    llm, llm_url = scripted_llm
    llm.replies = ["arrakis, dune, melange"]
    first, second, unshared = (make_answerbox(llm={"base_url": llm_url, "model": "scripted"}) for _ in range(3))
    body = {"query": {"match": {"body": QUERY}}}
    # It writes with the service account, so only a stored pipeline may share (every replica reads it).
    assert client.put(f"{first}/_search/pipeline/shared", json=_pipeline(shared_cache=True)).status_code == 200
    made, reused = (
        client.post(f"{url}/books/_search?search_pipeline=shared", json=body).json() for url in (first, second)
    )
    assert len(llm.calls) == 1
    assert (llm.calls[0]["model"], llm.calls[0]["temperature"]) == ("scripted", 0.0)
    assert made["ext"]["answerbox"]["query_expansion"]["cache"] is None
    report = reused["ext"]["answerbox"]["query_expansion"]
    assert report["cached"] is True
    assert report["cache"] == "index"
    assert report["expansion"] == "arrakis, dune, melange"
    assert reused["hits"] == made["hits"]
    stored = client.post(f"{osmem_url}/.answerbox-cache/_search", json={"query": {"match_all": {}}}).json()
    assert [hit["_source"]["value"] for hit in stored["hits"]["hits"]] == ["arrakis, dune, melange"]
    # A replica whose pipeline does not share pays for its own expansion.
    _search(client, unshared, body)
    assert len(llm.calls) == 2


def test_a_listing_and_a_count_go_out_as_written_and_ask_the_llm_nothing(
    books: None, make_answerbox: AnswerboxFactory, scripted_llm: tuple[ScriptedLLM, str], client: httpx.Client
) -> None:
    """An expansion changes scores, never which documents match: a search sorted by a field, or a
    count, reads no score, so it gets what the cluster gives the unexpanded query, at no LLM call."""
    llm, llm_url = scripted_llm
    llm.replies = ["arrakis, dune, melange"]
    url = make_answerbox(llm={"base_url": llm_url, "model": "scripted"})
    query = {"match": {"body": QUERY}}
    for rest in ({"sort": [{"year": "desc"}]}, {"size": 0}):
        direct = client.post(f"{url}/books/_search", json={"query": query, **rest}).json()
        result = _search(client, url, {"query": query, **rest})
        assert result["hits"] == direct["hits"]
        assert any("its query was not expanded" in w for w in result["ext"]["answerbox"]["warnings"])
    assert llm.calls == []
    # A search ranked by score is expanded.
    _search(client, url, {"query": query})
    assert len(llm.calls) == 1


@pytest.mark.real_llm
def test_the_local_llm_expands_a_question(
    make_answerbox: AnswerboxFactory, books: None, client: httpx.Client, real_llm: tuple[RecordingProxy, str]
) -> None:
    recorder, llm_url = real_llm
    # Generous limits: on two busy cores the 135M model may take a minute.
    url = make_answerbox(
        llm={"base_url": llm_url, "model": "smollm2", "timeout_s": 120},
        limits={"processor_timeout_s": 200, "pipeline_budget_s": 200},
    )
    question = "Which planet is spice mined on?"
    body = {"query": {"match": {"body": question}}}
    original = _ids(client.post(f"{url}/books/_search", json=body).json())  # no pipeline: passed through
    result = _search(client, url, body, method="q2e", mode="prf", max_tokens=24, timeout_s=120)
    (sent,) = completions(recorder)
    assert sent["max_tokens"] == 24
    assert question in sent["messages"][-1]["content"]
    assert "Spice is mined on the desert planet Arrakis." in sent["messages"][-1]["content"]  # the PRF context
    report, warnings = result["ext"]["answerbox"]["query_expansion"], result["ext"]["answerbox"]["warnings"]
    assert report["cached"] is False
    if report["fallback"]:  # the model's words held nothing usable: the fallback is named
        assert report["expansion"] == "", warnings
        assert any("searched with the original query" in w for w in warnings), warnings
    else:
        assert report["expansion"]
        assert report["llm_ms"] > 0
        assert warnings == []
    # An expansion only adds clauses: whatever the model wrote, the original query's hits stay.
    assert set(original) <= set(_ids(result))
