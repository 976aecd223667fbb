"""A processor's own searches keep the caller's whole scope.

The chain's node searches and CRAG's corrective search go through ``ScopedSearch``: the
caller's filters, ``post_filter``, ``routing``/``preference`` and ``_source`` filtering come
along, so text the caller's search could not show never reaches the report.
"""

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
from tests.support.scripted_llm import ScriptedLLM
from tests.support.servers import serve

DOCS = [
    {
        "_id": "public",
        "text": "Kevin Drew was born in Toronto, Ontario.",
        "secret": "vault code 4711",
        "level": "public",
    },
    {
        "_id": "restricted",
        "text": "Kevin Drew was born in Halifax, Nova Scotia.",
        "secret": "vault code 9999",
        "level": "restricted",
    },
]
CHAIN = (
    "[Query 1]: Where was Kevin Drew born?\n[Answer 1]: Toronto\n[Final Content]: Kevin Drew was born in Toronto [1]."
)
# The caller's scope: only public documents as hits, the secret field hidden, a routing and a preference.
SCOPED = {
    "query": {"match": {"text": "Kevin Drew born"}},
    "post_filter": {"term": {"level": "public"}},
    "_source": {"excludes": ["secret"]},
}
PARAMS = "routing=r1&preference=_local"


@dataclass
class Hop:
    url: str
    recorder: RecordingProxy
    llm: ScriptedLLM


@pytest.fixture
def hop(
    opensearch: OpenSearch, make_answerbox: AnswerboxFactory, osmem_url: str, scripted_llm: tuple[ScriptedLLM, str]
) -> Iterator[Hop]:
    properties = {"text": {"type": "text"}, "secret": {"type": "text"}, "level": {"type": "keyword"}}
    bulk_index(opensearch, "vault", [dict(d) for d in DOCS], {"properties": properties})
    llm, llm_url = scripted_llm
    recorder = RecordingProxy(osmem_url)
    with serve(recorder.app()) as hop_url:
        yield Hop(make_answerbox(opensearch={"url": hop_url}, llm={"base_url": llm_url}), recorder, llm)


def _search(client: httpx.Client, hop: Hop, pipeline: dict[str, Any]) -> dict[str, Any]:
    response = client.post(f"{hop.url}/vault/_search?{PARAMS}", json={**SCOPED, "search_pipeline": pipeline})
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    assert [hit["_id"] for hit in result["hits"]["hits"]] == ["public"]
    return result


def test_chain_searches_keep_post_filter_routing_preference_and_source_filtering(
    hop: Hop, client: httpx.Client
) -> None:
    hop.llm.replies = [CHAIN]
    result = _search(
        client, hop, {"response_processors": [{"chain_of_query": {"theta": -1e9, "r_max": 1, "skip_llm_above": 1}}]}
    )
    (sent,) = hop.recorder.matching("/_msearch")
    header, body = (json.loads(line) for line in sent.body.decode().splitlines())
    assert header == {"index": "vault", "routing": "r1", "preference": "_local"}
    assert body["post_filter"] == SCOPED["post_filter"]
    assert body["_source"] == {"includes": ["text"], "excludes": ["secret"]}
    report = json.dumps(result["ext"]["answerbox"]["chain"])
    assert "Halifax" not in report
    assert "vault code" not in report
    assert [r["_id"] for r in result["ext"]["answerbox"]["chain"]["references"]] == ["public"]


def test_the_corrective_search_keeps_the_callers_scope(hop: Hop, client: httpx.Client) -> None:
    hop.llm.replies = ["Kevin Drew birthplace"]
    evaluator = {"retrieval_evaluator": {"upper": 1.0, "lower": 1.0, "corrective": {"fields": ["text", "secret"]}}}
    result = _search(client, hop, {"response_processors": [evaluator]})
    corrective = [json.loads(r.body) for r in hop.recorder.matching("/vault/_search")][-1]
    assert "multi_match" in json.dumps(corrective["query"])
    assert corrective["post_filter"] == SCOPED["post_filter"]
    assert corrective["_source"]["excludes"] == ["secret"]
    assert "routing=r1" in hop.recorder.matching("/vault/_search")[-1].query
    retrieval = result["ext"]["answerbox"]["retrieval"]
    assert retrieval["verdict"] == "incorrect"
    assert {s["_id"] for s in retrieval["knowledge"]} <= {"public"}
    assert "vault code" not in json.dumps(retrieval)
    assert "Halifax" not in json.dumps(retrieval)


def test_a_point_in_time_search_gives_its_processors_no_search_of_their_own(
    hop: Hop, client: httpx.Client, opensearch: OpenSearch
) -> None:
    """A point in time binds its search to the indices it was opened on, and no path names them:
    a processor's search of the caller's target would read every index the caller can."""
    bulk_index(opensearch, "elsewhere", [{"_id": "other", "text": "Kevin Drew was born in Halifax, Nova Scotia."}])
    pit = client.post(f"{hop.url}/vault/_search/point_in_time", params={"keep_alive": "1m"}).json()["pit_id"]
    hop.llm.replies = [CHAIN]
    chain = {"chain_of_query": {"theta": -1e9, "r_max": 1, "skip_llm_above": 1}}
    body = {"pit": {"id": pit}, "query": SCOPED["query"], "search_pipeline": {"response_processors": [chain]}}
    response = client.post(f"{hop.url}/_search", json=body)
    assert response.status_code == 200, response.text
    result = response.json()
    assert {hit["_index"] for hit in result["hits"]["hits"]} == {"vault"}
    assert hop.recorder.matching("/_msearch") == []  # no node search went out
    assert "Halifax" not in json.dumps(result["ext"]["answerbox"]["chain"])
    assert any("point in time" in w for w in result["ext"]["answerbox"]["warnings"])
