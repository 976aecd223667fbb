"""Which pipeline a search runs, processor failures, verbose results, stats, and credentials:
in-process, against the fake cluster, with the test processors (``only_title`` narrows the
search to one title, ``label_hits`` labels the hits, ``explode`` fails). A search that runs
no pipeline goes by the passthrough, which the unit layer leaves unreachable; that, and a
pipeline id no pipeline has, left to OpenSearch, and an index's default as OpenSearch's own
settings hold it, are told over real HTTP in tests/pipeline/test_pipeline_selection.py."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support.processors import DOCS, FILTER_DUNE, LABEL, QUERY, registry_with_test_processors
from tests.unit.asgi import in_process, opensearch_error
from tests.unit.fake_opensearch import FakeOpenSearch, basic

NDJSON = {"content-type": "application/x-ndjson"}


@pytest.fixture
def cluster() -> FakeOpenSearch:
    cluster = FakeOpenSearch()
    cluster.index_docs("books", DOCS)
    return cluster


@pytest.fixture
async def client(cluster: FakeOpenSearch) -> AsyncIterator[httpx.AsyncClient]:
    async with in_process(cluster=cluster, registry=registry_with_test_processors()) as client:
        for name, body in (("dune_only", FILTER_DUNE), ("labels", LABEL)):
            assert (await client.put(f"/_search/pipeline/{name}", json=body)).status_code == 200
        yield client


def _ids(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return sorted(h["_id"] for h in response.json()["hits"]["hits"])


def _ndjson(*lines: dict[str, Any]) -> str:
    return "".join(json.dumps(line) + "\n" for line in lines)


async def test_query_parameter_selects_the_pipeline(client: httpx.AsyncClient) -> None:
    assert _ids(await client.post("/books/_search?search_pipeline=labels", json=QUERY)) == ["1", "2"]
    assert _ids(await client.post("/books/_search?search_pipeline=dune_only", json=QUERY)) == ["1"]


async def test_body_field_selects_the_pipeline(client: httpx.AsyncClient) -> None:
    assert _ids(await client.post("/books/_search", json={**QUERY, "search_pipeline": "dune_only"})) == ["1"]


async def test_index_default_and_none(cluster: FakeOpenSearch) -> None:
    cluster.index_docs("books", [], {"index.search.default_pipeline": "dune_only"})
    async with in_process(cluster=cluster, registry=registry_with_test_processors()) as client:
        for name, body in (("dune_only", FILTER_DUNE), ("labels", LABEL)):
            assert (await client.put(f"/_search/pipeline/{name}", json=body)).status_code == 200
        assert _ids(await client.post("/books/_search", json=QUERY)) == ["1"]
        # An explicit pipeline replaces the default.
        labelled = await client.post("/books/_search?search_pipeline=labels", json=QUERY)
        assert _ids(labelled) == ["1", "2"]
        assert [h["fields"]["label"] for h in labelled.json()["hits"]["hits"]] == [["seen"], ["seen"]]
        # _none runs none: the search is OpenSearch's alone, by the passthrough (unreachable here).
        searched = len(cluster.sent("/books/_search"))
        response = await client.post("/books/_search?search_pipeline=_none", json=QUERY)
        assert opensearch_error(response, 502, "connect_exception") == "OpenSearch is unreachable"
        assert len(cluster.sent("/books/_search")) == searched


async def test_inline_pipeline(client: httpx.AsyncClient) -> None:
    body = {**QUERY, "search_pipeline": {"request_processors": [{"only_title": {"title": "emma"}}]}}
    assert _ids(await client.post("/books/_search", json=body)) == ["2"]


async def test_msearch_selects_per_line(client: httpx.AsyncClient) -> None:
    payload = _ndjson(
        {"index": "books"}, QUERY,
        {"index": "books"}, {**QUERY, "search_pipeline": "dune_only"},
        {"index": "books"}, {**QUERY, "search_pipeline": "labels"},
    )  # fmt: skip
    response = await client.post("/_msearch", content=payload, headers=NDJSON)
    assert response.status_code == 200, response.text
    plain, dune, labelled = response.json()["responses"]
    assert sorted(h["_id"] for h in plain["hits"]["hits"]) == ["1", "2"]
    assert "ext" not in plain
    assert [h["_id"] for h in dune["hits"]["hits"]] == ["1"]
    assert [h["fields"]["label"] for h in labelled["hits"]["hits"]] == [["seen"], ["seen"]]
    assert labelled["ext"]["answerbox"]["warnings"] == ["labelled 2 hits for question 'desert spice'"]


async def test_msearch_query_parameter_applies_to_every_line(client: httpx.AsyncClient) -> None:
    payload = _ndjson({"index": "books"}, QUERY, {}, {"query": {"match_all": {}}})
    response = await client.post("/books/_msearch?search_pipeline=dune_only", content=payload, headers=NDJSON)
    assert response.status_code == 200, response.text
    assert [[h["_id"] for h in r["hits"]["hits"]] for r in response.json()["responses"]] == [["1"], ["1"]]


async def test_response_contract_and_verbose_results(client: httpx.AsyncClient) -> None:
    response = (await client.post("/books/_search?search_pipeline=labels&verbose_pipeline=true", json=QUERY)).json()
    report = response["ext"]["answerbox"]
    assert set(report) == {
        "answer",
        "citations",
        "conversation",
        "query_expansion",
        "retrieval",
        "chain",
        "timings_ms",
        "llm_skipped",
        "warnings",
        "plan",  # verbose_pipeline's
    }
    assert [step["processor"] for step in report["plan"]["steps"]] == ["label_hits:lab"]
    assert set(report["timings_ms"]) == {"label_hits:lab", "search", "total"}
    assert "retrieval_augmented_generation" not in response["ext"]
    [result] = response["processor_results"]
    assert result["processor_name"] == "label_hits"
    assert result["tag"] == "lab"
    assert result["status"] == "success"
    assert isinstance(result["duration_millis"], int)


async def test_failing_processor_fails_the_search_unless_ignored(client: httpx.AsyncClient) -> None:
    failing = {"response_processors": [{"explode": {"tag": "x"}}, {"label_hits": {"label": "after"}}]}
    assert (await client.put("/_search/pipeline/failing", json=failing)).status_code == 200
    response = await client.post("/books/_search?search_pipeline=failing", json=QUERY)
    assert response.status_code == 500
    error = response.json()
    assert error["status"] == 500
    assert error["error"]["type"] == "search_pipeline_exception"
    assert "explode:x" in error["error"]["reason"]
    assert "failed unexpectedly" in error["error"]["root_cause"][0]["reason"]
    assert "boom" not in response.text

    ignored = {
        "response_processors": [{"explode": {"tag": "x", "ignore_failure": True}}, {"label_hits": {"label": "after"}}]
    }
    assert (await client.put("/_search/pipeline/failing", json=ignored)).status_code == 200
    response = await client.post("/books/_search?search_pipeline=failing&verbose_pipeline=true", json=QUERY)
    assert response.status_code == 200
    body = response.json()
    assert [h["fields"]["label"] for h in body["hits"]["hits"]] == [["after"], ["after"]]
    assert [r["status"] for r in body["processor_results"]] == ["fail", "success"]
    assert body["ext"]["answerbox"]["warnings"] == [
        "processor [explode:x] failed and was skipped: it failed unexpectedly (the server's log has the details)",
        "labelled 2 hits for question 'desert spice'",
    ]


async def test_stats_and_metrics(client: httpx.AsyncClient) -> None:
    failing = {"response_processors": [{"explode": {"ignore_failure": True}}]}
    assert (await client.put("/_search/pipeline/failing", json=failing)).status_code == 200
    for _ in range(2):
        assert (await client.post("/books/_search?search_pipeline=labels", json=QUERY)).status_code == 200
    assert (await client.post("/books/_search?search_pipeline=failing", json=QUERY)).status_code == 200
    stats = (await client.get("/_answerbox/stats/search_pipeline")).json()
    [node] = stats["nodes"].values()
    pipelines = node["search_pipeline"]["pipelines"]
    assert pipelines["labels"]["response"]["count"] == 2
    stats = pipelines["labels"]["response_processors"][0]["label_hits:lab"]["stats"]
    assert pipelines["labels"]["response_processors"] == [
        {"label_hits:lab": {"type": "label_hits", "stats": {**stats, "count": 2, "failed": 0}}}
    ]
    assert pipelines["failing"]["response_processors"][0]["explode"]["stats"]["failed"] == 1
    assert node["search_pipeline"]["total_response"]["count"] == 3
    metrics = (await client.get("/metrics")).text
    assert 'answerbox_pipeline_runs_total{phase="response",pipeline="labels"} 2.0' in metrics
    assert 'answerbox_processor_failures_total{ignored="true",pipeline="failing",processor="explode"} 1.0' in metrics


async def test_searches_run_with_the_callers_credentials(cluster: FakeOpenSearch) -> None:
    service = {"service_username": "svc", "service_password": "pw"}
    async with in_process(cluster=cluster, registry=registry_with_test_processors(), opensearch=service) as client:
        assert (await client.put("/_search/pipeline/labels", json=LABEL)).status_code == 200
        caller = basic("caller", "pw")
        response = await client.post("/books/_search?search_pipeline=labels", json=QUERY, headers=caller)
        assert response.status_code == 200, response.text
    (search,) = cluster.sent("/books/_search")
    assert (search.headers, search.user) == (caller, None)
    assert search.body["search_pipeline"] == {}
    # Defining the pipeline was the caller's own rights check and write (with no credentials
    # here); everything else answerbox did on its own index was the service's.
    # The rights check asked before the index existed (not found, nothing judged) and again once
    # the service had created it.
    *probes, write = cluster.sent("/.answerbox-pipelines/_doc/*")
    assert ([p.method for p in probes], write.method, write.path) == (
        ["DELETE", "DELETE"],
        "PUT",
        "/.answerbox-pipelines/_doc/labels",
    )
    assert {(tuple(r.headers), r.user) for r in (*probes, write)} == {((), None)}
    own = [r for r in cluster.sent("/.answerbox-pipelines*") if r not in (*probes, write)]
    assert own
    assert {(r.user, tuple(r.headers)) for r in own} == {("svc", ())}
