"""Which pipeline a search runs, processor failures, verbose results, stats, and credentials."""

from __future__ import annotations

import json

import httpx
import pytest
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index
from tests.support.processors import registry_with_test_processors
from tests.support.recording_proxy import RecordingProxy
from tests.support.servers import serve

DOCS = [
    {"_id": "1", "title": "dune", "body": "spice on a desert planet"},
    {"_id": "2", "title": "emma", "body": "a desert of manners and spice"},
    {"_id": "3", "title": "ulysses", "body": "one day in dublin"},
]
FILTER_DUNE = {"request_processors": [{"only_title": {"title": "dune"}}]}
LABEL = {"response_processors": [{"label_hits": {"tag": "lab", "label": "seen"}}]}
QUERY = {"query": {"match": {"body": "desert spice"}}}


@pytest.fixture
def url(make_answerbox: AnswerboxFactory, opensearch: OpenSearch, client: httpx.Client) -> str:
    bulk_index(
        opensearch,
        "books",
        [dict(d) for d in DOCS],
        {"properties": {"title": {"type": "keyword"}, "body": {"type": "text"}}},
    )
    url = make_answerbox(registry=registry_with_test_processors())
    for name, body in (("dune_only", FILTER_DUNE), ("labels", LABEL)):
        assert client.put(f"{url}/_search/pipeline/{name}", json=body).status_code == 200
    return url


def _ids(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return sorted(h["_id"] for h in response.json()["hits"]["hits"])


def test_query_parameter_selects_the_pipeline(url: str, client: httpx.Client) -> None:
    assert _ids(client.post(f"{url}/books/_search", json=QUERY)) == ["1", "2"]
    assert _ids(client.post(f"{url}/books/_search?search_pipeline=dune_only", json=QUERY)) == ["1"]


def test_body_field_selects_the_pipeline(url: str, client: httpx.Client) -> None:
    assert _ids(client.post(f"{url}/books/_search", json={**QUERY, "search_pipeline": "dune_only"})) == ["1"]


def test_index_default_and_none(url: str, client: httpx.Client, opensearch: OpenSearch) -> None:
    opensearch.indices.put_settings(index="books", body={"index.search.default_pipeline": "dune_only"})
    assert _ids(client.post(f"{url}/books/_search", json=QUERY)) == ["1"]
    assert _ids(client.post(f"{url}/books/_search?search_pipeline=_none", json=QUERY)) == ["1", "2"]
    # An explicit pipeline replaces the default.
    labelled = client.post(f"{url}/books/_search?search_pipeline=labels", json=QUERY)
    assert _ids(labelled) == ["1", "2"]


def test_inline_pipeline(url: str, client: httpx.Client) -> None:
    body = {**QUERY, "search_pipeline": {"request_processors": [{"only_title": {"title": "emma"}}]}}
    assert _ids(client.post(f"{url}/books/_search", json=body)) == ["2"]


def test_unknown_pipeline_id_is_left_to_opensearch(url: str, client: httpx.Client, osmem_url: str) -> None:
    via = client.post(f"{url}/books/_search?search_pipeline=nope", json=QUERY)
    direct = client.post(f"{osmem_url}/books/_search?search_pipeline=nope", json=QUERY)
    assert (via.status_code, via.json()) == (direct.status_code, direct.json())


def test_msearch_selects_per_line(url: str, client: httpx.Client) -> None:
    lines = [
        {"index": "books"}, QUERY,
        {"index": "books"}, {**QUERY, "search_pipeline": "dune_only"},
        {"index": "books"}, {**QUERY, "search_pipeline": "labels"},
    ]
    payload = "".join(json.dumps(line) + "\n" for line in lines)
    response = client.post(f"{url}/_msearch", content=payload, headers={"content-type": "application/x-ndjson"})
    assert response.status_code == 200, response.text
    plain, dune, labelled = response.json()["responses"]
    assert sorted(h["_id"] for h in plain["hits"]["hits"]) == ["1", "2"]
    assert "ext" not in plain
    assert [h["_id"] for h in dune["hits"]["hits"]] == ["1"]
    assert all(h["fields"]["label"] == ["seen"] for h in labelled["hits"]["hits"])
    assert labelled["ext"]["answerbox"]["warnings"] == ["labelled 2 hits for question 'desert spice'"]


def test_msearch_query_parameter_applies_to_every_line(url: str, client: httpx.Client) -> None:
    payload = "".join(json.dumps(line) + "\n" for line in [{"index": "books"}, QUERY, {}, {"query": {"match_all": {}}}])
    response = client.post(
        f"{url}/books/_msearch?search_pipeline=dune_only",
        content=payload,
        headers={"content-type": "application/x-ndjson"},
    )
    assert [[h["_id"] for h in r["hits"]["hits"]] for r in response.json()["responses"]] == [["1"], ["1"]]


def test_response_contract_and_verbose_results(url: str, client: httpx.Client) -> None:
    response = client.post(f"{url}/books/_search?search_pipeline=labels&verbose_pipeline=true", json=QUERY).json()
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
    }
    assert {"label_hits:lab", "search", "total"} <= set(report["timings_ms"])
    assert "retrieval_augmented_generation" not in response["ext"]
    [result] = response["processor_results"]
    assert result["processor_name"] == "label_hits"
    assert result["tag"] == "lab"
    assert result["status"] == "success"
    assert isinstance(result["duration_millis"], int)


def test_failing_processor_fails_the_search_unless_ignored(url: str, client: httpx.Client) -> None:
    failing = {"response_processors": [{"explode": {"tag": "x"}}, {"label_hits": {"label": "after"}}]}
    client.put(f"{url}/_search/pipeline/failing", json=failing)
    response = client.post(f"{url}/books/_search?search_pipeline=failing", json=QUERY)
    assert response.status_code == 500
    error = response.json()
    assert error["error"]["type"] == "search_pipeline_exception"
    assert "explode:x" in error["error"]["reason"]
    assert "boom" in error["error"]["root_cause"][0]["reason"]

    ignored = {
        "response_processors": [{"explode": {"tag": "x", "ignore_failure": True}}, {"label_hits": {"label": "after"}}]
    }
    client.put(f"{url}/_search/pipeline/failing", json=ignored)
    response = client.post(f"{url}/books/_search?search_pipeline=failing&verbose_pipeline=true", json=QUERY)
    assert response.status_code == 200
    body = response.json()
    assert all(h["fields"]["label"] == ["after"] for h in body["hits"]["hits"])
    assert [r["status"] for r in body["processor_results"]] == ["fail", "success"]
    assert any("explode:x" in w for w in body["ext"]["answerbox"]["warnings"])


def test_stats_and_metrics(url: str, client: httpx.Client) -> None:
    client.put(f"{url}/_search/pipeline/failing", json={"response_processors": [{"explode": {"ignore_failure": True}}]})
    for _ in range(2):
        client.post(f"{url}/books/_search?search_pipeline=labels", json=QUERY)
    client.post(f"{url}/books/_search?search_pipeline=failing", json=QUERY)
    stats = client.get(f"{url}/_answerbox/stats/search_pipeline").json()
    [node] = stats["nodes"].values()
    pipelines = node["search_pipeline"]["pipelines"]
    assert pipelines["labels"]["response"]["count"] == 2
    stats = pipelines["labels"]["response_processors"][0]["label_hits:lab"]["stats"]
    assert pipelines["labels"]["response_processors"] == [
        {"label_hits:lab": {"type": "label_hits", "stats": {**stats, "count": 2, "failed": 0}}}
    ]
    assert pipelines["failing"]["response_processors"][0]["explode"]["stats"]["failed"] == 1
    assert node["search_pipeline"]["total_response"]["count"] == 3
    metrics = client.get(f"{url}/metrics").text
    assert 'answerbox_pipeline_runs_total{phase="response",pipeline="labels"} 2.0' in metrics
    assert 'answerbox_processor_failures_total{ignored="true",pipeline="failing",processor="explode"} 1.0' in metrics


def test_searches_run_with_the_callers_credentials(
    make_answerbox: AnswerboxFactory, osmem_url: str, opensearch: OpenSearch, client: httpx.Client
) -> None:
    bulk_index(opensearch, "books", [dict(d) for d in DOCS])
    recorder = RecordingProxy(osmem_url)
    with serve(recorder.app()) as hop:
        url = make_answerbox(
            registry=registry_with_test_processors(),
            opensearch={"url": hop, "service_username": "svc", "service_password": "pw"},
        )
        client.put(f"{url}/_search/pipeline/labels", json=LABEL)
        caller = "Basic Y2FsbGVyOnB3"
        assert (
            client.post(
                f"{url}/books/_search?search_pipeline=labels", json=QUERY, headers={"Authorization": caller}
            ).status_code
            == 200
        )
    searches = [r for r in recorder.requests if r.path == "/books/_search"]
    assert len(searches) == 1
    assert searches[0].headers.get("authorization") == caller
    assert json.loads(searches[0].body)["search_pipeline"] == {}
    # Defining the pipeline was the caller's own rights check and write (with no credentials
    # here); everything else answerbox did on its own index was the service's.
    probe, write = [
        r
        for r in recorder.requests
        if r.path.startswith("/.answerbox-pipelines/_doc/") and r.method in ("PUT", "DELETE")
    ]
    assert (probe.method, write.path) == ("DELETE", "/.answerbox-pipelines/_doc/labels")
    assert "authorization" not in write.headers
    assert "authorization" not in probe.headers
    own = [r for r in recorder.requests if r.path.startswith("/.answerbox-pipelines") and r not in (probe, write)]
    assert own
    assert all(r.headers.get("authorization", "").startswith("Basic c3Zj") for r in own)
