"""The pipeline's time budget over HTTP, in-process: a pipeline's ``budget_s`` is what the engine
shares out, it may not pass ``limits.pipeline_budget_s``, and a caller that disconnects stops
its search. How shares are cut and a processor past its share is stopped is told on a fake
clock in test_pipeline.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, MutableMapping
from typing import Any, ClassVar

import httpx
import pytest
from answerbox.pipeline.base import JSON, PipelineContext, ProcessorConfig, ResponseProcessor, SearchRequest
from answerbox.pipeline.catalogue.registry import ProcessorRegistry

from tests.support.processors import registry_with_test_processors
from tests.unit.asgi import in_process, in_process_app, opensearch_error
from tests.unit.fake_opensearch import FakeOpenSearch

LIMITS = {"pipeline_budget_s": 20}
QUERY = {"query": {"match": {"text": "note"}}}


class Hold(ResponseProcessor[ProcessorConfig]):
    """Holds its search until cancelled; says when it started and that it was cancelled."""

    type_name = "hold"
    config_model = ProcessorConfig
    started: ClassVar[asyncio.Event]
    cancelled: ClassVar[list[str]]

    async def process_response(self, request: SearchRequest, response: JSON, ctx: PipelineContext) -> JSON:
        Hold.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            Hold.cancelled.append(self.name)
            raise
        return response


def _registry() -> ProcessorRegistry:
    registry = registry_with_test_processors()
    registry.register(Hold)
    return registry


@pytest.fixture
def cluster() -> FakeOpenSearch:
    cluster = FakeOpenSearch()
    cluster.index_docs("notes", [{"_id": "1", "text": "a note"}])
    return cluster


@pytest.fixture
async def client(cluster: FakeOpenSearch) -> AsyncIterator[httpx.AsyncClient]:
    async with in_process(cluster=cluster, registry=_registry(), limits=LIMITS) as client:
        yield client


def _time_given(warnings: list[str], name: str) -> float:
    (given,) = [float(w.split(" had ")[1].removesuffix("s")) for w in warnings if w.startswith(f"{name} had ")]
    return given


async def test_the_pipelines_budget_is_shared_out_by_weight(client: httpx.AsyncClient) -> None:
    """Two processors of weight 1 in a 4 s budget: the first is given half, the second what is
    left (the first took none of its share)."""
    pipeline: dict[str, Any] = {
        "budget_s": 4,
        "response_processors": [{"sleep": {"tag": "first"}}, {"sleep": {"tag": "next"}}],
    }
    response = await client.post("/notes/_search", json={**QUERY, "search_pipeline": pipeline})
    assert response.status_code == 200, response.text
    warnings = response.json()["ext"]["answerbox"]["warnings"]
    assert 1.9 < _time_given(warnings, "sleep:first") <= 2.0
    assert 3.9 < _time_given(warnings, "sleep:next") <= 4.0
    assert [h["_id"] for h in response.json()["hits"]["hits"]] == ["1"]


async def test_a_budget_above_the_limit_is_refused(client: httpx.AsyncClient) -> None:
    response = await client.put("/_search/pipeline/long", json={"budget_s": 21, "response_processors": [{"sleep": {}}]})
    reason = opensearch_error(response, 400, "illegal_argument_exception")
    assert "[budget_s] 21 is above limits.pipeline_budget_s (20)" in reason


async def test_a_caller_that_disconnects_stops_its_search(cluster: FakeOpenSearch) -> None:
    Hold.started, Hold.cancelled = asyncio.Event(), []
    body = json.dumps({**QUERY, "search_pipeline": {"response_processors": [{"hold": {"tag": "held"}}]}}).encode()
    requests = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if requests:
            return requests.pop()
        await Hold.started.wait()  # the caller leaves while its search runs
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/notes/_search",
        "raw_path": b"/notes/_search",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"answerbox"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 50000),
        "server": ("answerbox", 80),
    }
    async with in_process_app(cluster=cluster, registry=_registry(), limits=LIMITS) as app:
        await asyncio.wait_for(app(scope, receive, send), 5)
    assert Hold.cancelled == ["hold:held"]
    assert sent[0]["type"] == "http.response.start"
    assert sent[0]["status"] == 499
