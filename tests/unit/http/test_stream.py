"""``_answerbox/stream`` refuses what it cannot run before any search starts, in OpenSearch's error shape."""

from __future__ import annotations

import httpx
import pytest

from tests.unit.asgi import opensearch_error
from tests.unit.conftest import MAX_REQUEST_BYTES

STREAM = "/docs/_answerbox/stream"
JSON_TYPE = {"content-type": "application/json"}


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", ""])
async def test_a_body_that_is_not_declared_json_is_refused_with_406(
    app_client: httpx.AsyncClient, content_type: str
) -> None:
    response = await app_client.post(
        STREAM, content=b'{"query": {"match_all": {}}}', headers={"content-type": content_type}
    )
    reason = opensearch_error(response, 406, "illegal_argument_exception")
    assert "send application/json" in reason


@pytest.mark.parametrize("body", [b'{"query": ', b"[1, 2]", b"\xff\xfe"], ids=["cut-off", "not-an-object", "not-utf8"])
async def test_a_body_that_is_not_a_json_object_is_a_parsing_exception(
    app_client: httpx.AsyncClient, body: bytes
) -> None:
    response = await app_client.post(STREAM, content=body, headers=JSON_TYPE)
    assert "needs a JSON object" in opensearch_error(response, 400, "parsing_exception")


async def test_a_body_over_the_limit_is_refused_with_413(app_client: httpx.AsyncClient) -> None:
    response = await app_client.post(STREAM, json={"query": {"match": {"text": "x" * MAX_REQUEST_BYTES}}})
    assert f"limit of {MAX_REQUEST_BYTES} bytes" in opensearch_error(response, 413, "content_too_long_exception")


@pytest.mark.parametrize(
    "search_pipeline",
    ["_none", {"response_processors": [{"retrieval_evaluator": {"top_n": 5}}]}],
    ids=["no-pipeline", "no-answer"],
)
async def test_a_pipeline_that_writes_no_answer_cannot_be_streamed(
    app_client: httpx.AsyncClient, search_pipeline: object
) -> None:
    response = await app_client.post(STREAM, json={"query": {"match_all": {}}, "search_pipeline": search_pipeline})
    assert "[cited_answer]" in opensearch_error(response, 400, "illegal_argument_exception")


async def test_an_invalid_inline_pipeline_names_the_processor(app_client: httpx.AsyncClient) -> None:
    body = {
        "query": {"match_all": {}},
        "search_pipeline": {"response_processors": [{"cited_answer": {"size": "many"}}]},
    }
    reason = opensearch_error(await app_client.post(STREAM, json=body), 400, "illegal_argument_exception")
    assert reason.startswith("processor [cited_answer]")
    assert "[size]" in reason


async def test_a_filter_path_is_refused_its_events_are_answerboxs_own(app_client: httpx.AsyncClient) -> None:
    body = {"query": {"match_all": {}}, "search_pipeline": {"response_processors": [{"cited_answer": {}}]}}
    response = await app_client.post(f"{STREAM}?filter_path=hits.hits._id", json=body)
    assert "no filter_path" in opensearch_error(response, 400, "illegal_argument_exception")
