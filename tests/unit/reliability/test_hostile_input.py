"""Input that used to escape as a 500 or search the wrong indices: deep JSON and _msearch
headers, in-process against the fake cluster, which records what reached it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support.processors import registry_with_test_processors
from tests.unit.asgi import in_process, opensearch_error
from tests.unit.fake_opensearch import FakeOpenSearch

LABEL = {"response_processors": [{"label_hits": {"label": "seen"}}]}
NDJSON = {"content-type": "application/x-ndjson"}


@pytest.fixture
def cluster() -> FakeOpenSearch:
    cluster = FakeOpenSearch()
    for index in ("a", "b"):
        cluster.index_docs(index, [{"_id": f"{index}1", "body": "desert spice"}])
    return cluster


@pytest.fixture
async def client(cluster: FakeOpenSearch) -> AsyncIterator[httpx.AsyncClient]:
    async with in_process(cluster=cluster, registry=registry_with_test_processors()) as client:
        assert (await client.put("/_search/pipeline/labels", json=LABEL)).status_code == 200
        yield client


def _ndjson(*lines: dict[str, Any]) -> str:
    return "".join(json.dumps(line) + "\n" for line in lines)


@pytest.mark.parametrize("deep", ["[" * 100_000 + "]" * 100_000, '{"a":' * 5_000 + "1" + "}" * 5_000])
async def test_json_nested_too_deeply_is_a_parse_error(
    client: httpx.AsyncClient, cluster: FakeOpenSearch, deep: str
) -> None:
    response = await client.put("/_search/pipeline/deep", content=deep, headers={"content-type": "application/json"})
    reason = opensearch_error(response, 400, "parsing_exception")
    assert reason == "request body is not valid JSON: nested too deeply"
    assert (await client.get("/_search/pipeline/deep")).status_code == 404
    # As a search body it is OpenSearch's to judge: answerbox passes it on untouched (by the
    # passthrough, unreachable here), runs no pipeline and does not fail itself.
    searched = await client.post(
        "/a/_search?search_pipeline=labels", content=deep, headers={"content-type": "application/json"}
    )
    assert opensearch_error(searched, 502, "connect_exception") == "OpenSearch is unreachable"
    assert cluster.sent("/a/*") == []


async def test_msearch_header_may_name_a_list_of_indices(client: httpx.AsyncClient, cluster: FakeOpenSearch) -> None:
    query = {"query": {"match": {"body": "spice"}}}
    # The first line has no pipeline of its own: its indices' defaults are looked up.
    payload = _ndjson({"index": ["a", "b"]}, query, {"index": ["a", "b"], "search_pipeline": "labels"}, query)
    response = await client.post("/_msearch", content=payload, headers=NDJSON)
    assert response.status_code == 200, response.text
    plain, labelled = response.json()["responses"]
    assert sorted(h["_index"] for h in plain["hits"]["hits"]) == ["a", "b"]
    assert sorted(h["_index"] for h in labelled["hits"]["hits"]) == ["a", "b"]
    assert [h["fields"]["label"] for h in labelled["hits"]["hits"]] == [["seen"], ["seen"]]
    (settings,) = cluster.sent("/a,b/_settings/*")
    assert settings.path == "/a,b/_settings/index.search.default_pipeline"


async def test_an_empty_msearch_header_searches_the_path_index_only(client: httpx.AsyncClient) -> None:
    payload = _ndjson({}, {"query": {"match_all": {}}}, {"search_pipeline": "labels"}, {"query": {"match_all": {}}})
    response = await client.post("/a/_msearch", content=payload, headers=NDJSON)
    assert response.status_code == 200, response.text
    plain, labelled = response.json()["responses"]
    assert [h["_index"] for h in plain["hits"]["hits"]] == ["a"]
    assert [h["_index"] for h in labelled["hits"]["hits"]] == ["a"]


async def test_msearch_lines_answerbox_does_not_run_reach_opensearch_as_written(
    client: httpx.AsyncClient, cluster: FakeOpenSearch
) -> None:
    native = {"index": "a", "search_pipeline": "opensearch_side"}
    payload = _ndjson(
        native, {"query": {"match_all": {}}}, {"index": "b", "search_pipeline": "labels"}, {"query": {"match_all": {}}}
    )
    await client.post("/_msearch", content=payload, headers=NDJSON)
    (sent,) = cluster.sent("/_msearch")
    header, body, own_header, own_body = sent.body
    # OpenSearch still runs its own pipeline (or the index's default) for the first line...
    assert header == native
    assert "search_pipeline" not in body
    # ...and answerbox's line carries only what OpenSearch must run, inline.
    assert own_header == {"index": "b"}
    assert own_body["search_pipeline"] == {}
