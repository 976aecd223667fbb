"""The search-pipeline API in-process against the fake cluster: CRUD and validation errors.
That a stored pipeline outlives the process and is shared with another stays over real HTTP
(tests/pipeline/test_pipeline_api.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support.processors import registry_with_test_processors
from tests.unit.asgi import in_process, opensearch_error
from tests.unit.fake_opensearch import FakeOpenSearch

LABEL = {
    "description": "labels hits",
    "version": 3,
    "response_processors": [{"label_hits": {"tag": "l1", "label": "seen"}}],
}


@pytest.fixture
def cluster() -> FakeOpenSearch:
    return FakeOpenSearch()


@pytest.fixture
async def client(cluster: FakeOpenSearch) -> AsyncIterator[httpx.AsyncClient]:
    async with in_process(cluster=cluster, registry=registry_with_test_processors()) as client:
        yield client


async def test_crud_round_trip(client: httpx.AsyncClient, cluster: FakeOpenSearch) -> None:
    assert (await client.put("/_search/pipeline/labels", json=LABEL)).json() == {"acknowledged": True}
    assert (await client.put("/_search/pipeline/other", json={"request_processors": []})).status_code == 200
    assert cluster.source(".answerbox-pipelines", "labels") == {"definition": LABEL}
    assert (await client.get("/_search/pipeline/labels")).json() == {"labels": LABEL}
    assert (await client.get("/_search/pipeline")).json() == {"labels": LABEL, "other": {}}
    assert (await client.get("/_search/pipeline/lab*")).json() == {"labels": LABEL}
    assert (await client.delete("/_search/pipeline/labels")).json() == {"acknowledged": True}
    missing = await client.get("/_search/pipeline/labels")
    assert (missing.status_code, missing.json()) == (404, {})
    gone = await client.delete("/_search/pipeline/labels")
    assert opensearch_error(gone, 404, "resource_not_found_exception") == "pipeline [labels] is missing"
    assert cluster.source(".answerbox-pipelines", "labels") is None


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"response_processors": [{"label_hits": {"label": "x", "colour": "red"}}]}, "colour"),
        ({"response_processors": [{"label_hits": {}}]}, "label"),
        ({"response_processors": [{"no_such_processor": {}}]}, "no_such_processor"),
        ({"response_processors": [{"label_hits": {"label": "x"}, "explode": {}}]}, "exactly one key"),
        ({"request_processors": [{"label_hits": {"label": "x"}}]}, "cannot be used in request_processors"),
        ({"surprise": 1}, "surprise"),
    ],
)
async def test_invalid_pipeline_is_a_400_in_opensearch_shape(
    client: httpx.AsyncClient, cluster: FakeOpenSearch, body: dict[str, Any], fragment: str
) -> None:
    response = await client.put("/_search/pipeline/bad", json=body)
    assert fragment in opensearch_error(response, 400, "illegal_argument_exception")
    assert cluster.sent("/.answerbox-pipelines/_doc/bad", "PUT") == []
    assert (await client.get("/_search/pipeline/bad")).status_code == 404


async def test_malformed_body_is_a_400_parse_error(client: httpx.AsyncClient, cluster: FakeOpenSearch) -> None:
    response = await client.put(
        "/_search/pipeline/bad", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert opensearch_error(response, 400, "parsing_exception").startswith("request body is not valid JSON")
    assert cluster.changes() == []
