"""Input that used to escape as a 500 or search the wrong indices: deep JSON and _msearch
headers, over real HTTP against osmem-server."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index
from tests.support.processors import registry_with_test_processors
from tests.support.recording_proxy import RecordingProxy
from tests.support.servers import serve

LABEL = {"response_processors": [{"label_hits": {"label": "seen"}}]}
NDJSON = {"content-type": "application/x-ndjson"}


@pytest.fixture
def hop(make_answerbox: AnswerboxFactory, opensearch: OpenSearch, osmem_url: str, client: httpx.Client) -> Any:
    """answerbox with a recorder between it and osmem-server, two indices and a labelling pipeline."""
    for index in ("a", "b"):
        bulk_index(opensearch, index, [{"_id": f"{index}1", "body": "desert spice"}])
    recorder = RecordingProxy(osmem_url)
    with serve(recorder.app()) as hop_url:
        url = make_answerbox(registry=registry_with_test_processors(), opensearch={"url": hop_url})
        assert client.put(f"{url}/_search/pipeline/labels", json=LABEL).status_code == 200
        yield url, recorder


def _ndjson(*lines: dict[str, Any]) -> str:
    return "".join(json.dumps(line) + "\n" for line in lines)


def _assert_opensearch_error(response: httpx.Response, status: int, error_type: str) -> None:
    assert response.status_code == status, response.text
    error = response.json()
    assert error["status"] == status
    assert error["error"]["type"] == error_type
    assert error["error"]["root_cause"][0]["type"] == error_type
    assert error["error"]["reason"]


@pytest.mark.parametrize("deep", ["[" * 100_000 + "]" * 100_000, '{"a":' * 5_000 + "1" + "}" * 5_000])
def test_json_nested_too_deeply_is_a_parse_error(hop: Any, client: httpx.Client, deep: str) -> None:
    url, _ = hop
    response = client.put(f"{url}/_search/pipeline/deep", content=deep, headers={"content-type": "application/json"})
    _assert_opensearch_error(response, 400, "parsing_exception")
    assert "nested too deeply" in response.json()["error"]["reason"]
    assert client.get(f"{url}/_search/pipeline/deep").status_code == 404
    # As a search body it is OpenSearch's to judge; answerbox itself does not fail.
    assert (
        client.post(
            f"{url}/a/_search?search_pipeline=labels", content=deep, headers={"content-type": "application/json"}
        ).status_code
        < 500
    )


def test_msearch_header_may_name_a_list_of_indices(hop: Any, client: httpx.Client) -> None:
    url, _ = hop
    query = {"query": {"match": {"body": "spice"}}}
    # The first line has no pipeline of its own: its indices' defaults are looked up.
    payload = _ndjson({"index": ["a", "b"]}, query, {"index": ["a", "b"], "search_pipeline": "labels"}, query)
    response = client.post(f"{url}/_msearch", content=payload, headers=NDJSON)
    assert response.status_code == 200, response.text
    plain, labelled = response.json()["responses"]
    assert sorted(h["_index"] for h in plain["hits"]["hits"]) == ["a", "b"]
    assert sorted(h["_index"] for h in labelled["hits"]["hits"]) == ["a", "b"]
    assert all(h["fields"]["label"] == ["seen"] for h in labelled["hits"]["hits"])


def test_an_empty_msearch_header_searches_the_path_index_only(hop: Any, client: httpx.Client) -> None:
    url, _ = hop
    payload = _ndjson({}, {"query": {"match_all": {}}}, {"search_pipeline": "labels"}, {"query": {"match_all": {}}})
    response = client.post(f"{url}/a/_msearch", content=payload, headers=NDJSON)
    assert response.status_code == 200, response.text
    plain, labelled = response.json()["responses"]
    assert [h["_index"] for h in plain["hits"]["hits"]] == ["a"]
    assert [h["_index"] for h in labelled["hits"]["hits"]] == ["a"]


def test_msearch_lines_answerbox_does_not_run_reach_opensearch_as_written(hop: Any, client: httpx.Client) -> None:
    url, recorder = hop
    native = {"index": "a", "search_pipeline": "opensearch_side"}
    payload = _ndjson(
        native, {"query": {"match_all": {}}}, {"index": "b", "search_pipeline": "labels"}, {"query": {"match_all": {}}}
    )
    client.post(f"{url}/_msearch", content=payload, headers=NDJSON)
    (sent,) = [r for r in recorder.matching("_msearch") if r.method == "POST"]
    header, body, own_header, own_body = [json.loads(line) for line in sent.body.splitlines() if line.strip()]
    # OpenSearch still runs its own pipeline (or the index's default) for the first line...
    assert header == native
    assert "search_pipeline" not in body
    # ...and answerbox's line carries only what OpenSearch must run, inline.
    assert own_header == {"index": "b"}
    assert own_body["search_pipeline"] == {}
