"""``_search``, ``_msearch`` and the passthrough: the limits answerbox enforces itself, and an
unreachable OpenSearch reported in OpenSearch's error shape."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx

from tests.unit.asgi import opensearch_error
from tests.unit.conftest import MAX_MSEARCH_SEARCHES, MAX_REQUEST_BYTES


async def test_a_declared_length_over_the_limit_is_refused_before_reading(app_client: httpx.AsyncClient) -> None:
    response = await app_client.post("/docs/_search", json={"query": {"match": {"text": "x" * MAX_REQUEST_BYTES}}})
    reason = opensearch_error(response, 413, "content_too_long_exception")
    assert reason.startswith("request body of ")
    assert f"limit of {MAX_REQUEST_BYTES} bytes" in reason


async def test_a_streamed_body_over_the_limit_is_refused_as_it_arrives(app_client: httpx.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:  # no content-length: chunked
        for _ in range(4):
            yield b" " * (MAX_REQUEST_BYTES // 2)

    response = await app_client.post("/docs/_search", content=chunks(), headers={"content-type": "application/json"})
    reason = opensearch_error(response, 413, "content_too_long_exception")
    assert reason == f"request body is larger than the limit of {MAX_REQUEST_BYTES} bytes"


async def test_msearch_with_more_searches_than_the_limit_is_refused(app_client: httpx.AsyncClient) -> None:
    pair: list[dict[str, object]] = [{"index": "docs"}, {"query": {"match_all": {}}}]
    ndjson = "".join(json.dumps(line) + "\n" for line in pair * (MAX_MSEARCH_SEARCHES + 1))
    response = await app_client.post("/_msearch", content=ndjson, headers={"content-type": "application/x-ndjson"})
    reason = opensearch_error(response, 400, "illegal_argument_exception")
    assert f"_msearch holds {MAX_MSEARCH_SEARCHES + 1} searches" in reason


async def test_opensearch_unreachable_is_a_502_in_opensearchs_shape(app_client: httpx.AsyncClient) -> None:
    response = await app_client.get("/_cluster/health")
    assert opensearch_error(response, 502, "connect_exception").startswith("OpenSearch is unreachable")


async def test_stats_need_no_opensearch(app_client: httpx.AsyncClient) -> None:
    response = await app_client.get("/_answerbox/stats/search_pipeline")
    assert response.status_code == 200
    (node,) = response.json()["nodes"].values()
    assert node["search_pipeline"]["total_request"] == {"count": 0, "time_in_millis": 0, "current": 0, "failed": 0}
    metrics = await app_client.get("/metrics")
    assert metrics.status_code == 200
    assert metrics.headers["content-type"].startswith("text/plain")
