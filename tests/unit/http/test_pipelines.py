"""``PUT /_search/pipeline/{id}`` checks the id and the body's shape, then the caller's right to
store pipelines, then every processor, before it stores anything.

The rights check and storing are OpenSearch's part; here OpenSearch is unreachable, so only a
definition whose shape passed gets as far as the rights check (and a 502).
"""

from __future__ import annotations

import httpx
import pytest

from tests.unit.asgi import opensearch_error
from tests.unit.conftest import MAX_REQUEST_BYTES

VALID = {"response_processors": [{"cited_answer": {"size": 5}}]}


@pytest.mark.parametrize(
    ("raw_id", "problem"),
    [
        ("_none", "it is reserved"),
        ("%2E%2E", "it is reserved"),
        ("a,b", "must not contain ','"),
        ("a%20b", "must not contain ' '"),
        ("x" * 256, "longer than 255 bytes"),
    ],
    ids=["none", "dot-dot", "comma", "space", "long"],
)
async def test_an_invalid_id_is_refused_before_anything_else(
    app_client: httpx.AsyncClient, raw_id: str, problem: str
) -> None:
    # Not even JSON: the id is checked first.
    response = await app_client.put(
        f"/_search/pipeline/{raw_id}", content=b"not json", headers={"content-type": "text/plain"}
    )
    reason = opensearch_error(response, 400, "illegal_argument_exception")
    assert reason.startswith("invalid search pipeline id [")
    assert problem in reason


async def test_a_body_not_declared_json_is_refused_with_406(app_client: httpx.AsyncClient) -> None:
    response = await app_client.put("/_search/pipeline/answers", content=b"{}", headers={"content-type": "text/plain"})
    opensearch_error(response, 406, "illegal_argument_exception")


async def test_malformed_json_is_a_parsing_exception(app_client: httpx.AsyncClient) -> None:
    response = await app_client.put(
        "/_search/pipeline/answers", content=b'{"response_processors": [', headers={"content-type": "application/json"}
    )
    assert opensearch_error(response, 400, "parsing_exception").startswith("request body is not valid JSON")


async def test_a_body_over_the_limit_is_refused_with_413(app_client: httpx.AsyncClient) -> None:
    response = await app_client.put("/_search/pipeline/answers", json={"description": "x" * MAX_REQUEST_BYTES})
    opensearch_error(response, 413, "content_too_long_exception")


@pytest.mark.parametrize(
    ("definition", "complaint"),
    [
        ({"request_processors": {"not": "a list"}}, "invalid search pipeline: [request_processors]"),
        ({"response_processors": [{"cited_answer": {}, "rerank": {}}]}, "exactly one key"),
        ({"unknown_field": 1}, "[unknown_field]"),
    ],
    ids=["not-a-list", "two-types", "unknown-field"],
)
async def test_an_invalid_definition_is_refused_naming_the_problem(
    app_client: httpx.AsyncClient, definition: object, complaint: str
) -> None:
    response = await app_client.put("/_search/pipeline/answers", json=definition)
    assert complaint in opensearch_error(response, 400, "illegal_argument_exception")


@pytest.mark.parametrize(
    "definition", [VALID, {"response_processors": [{"cited_answer": {"size": "many"}}]}], ids=["valid", "bad-processor"]
)
async def test_processors_are_built_only_after_the_rights_check(
    app_client: httpx.AsyncClient, definition: object
) -> None:
    # A processor's config (its templates rendered) is looked at only for a caller OpenSearch
    # lets write pipelines; unreachable here, so neither gets past the check.
    response = await app_client.put("/_search/pipeline/answers", json=definition)
    assert "OpenSearch is unreachable" in opensearch_error(response, 502, "connect_exception")
