"""What answerbox accepts itself: pipeline ids validated as names OpenSearch stores are
(`_none`, which means "no pipeline" in a search, dot paths, control characters and
separators are refused), and bodies it reads only with a JSON content type. In-process,
against the fake cluster the pipelines are stored in."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.unit.asgi import in_process, opensearch_error
from tests.unit.fake_opensearch import FakeOpenSearch

PIPELINE: dict[str, Any] = {"response_processors": [{"retrieval_evaluator": {}}]}


@pytest.fixture
def cluster() -> FakeOpenSearch:
    return FakeOpenSearch()


@pytest.fixture
async def client(cluster: FakeOpenSearch) -> AsyncIterator[httpx.AsyncClient]:
    async with in_process(cluster=cluster) as client:
        yield client


@pytest.mark.parametrize("raw_id", ["_none", "%2E%2E", "a%00b", "a%20b", "a,b", "a%23b", "x" * 256])
async def test_invalid_ids_are_refused(client: httpx.AsyncClient, cluster: FakeOpenSearch, raw_id: str) -> None:
    response = await client.put(httpx.URL(f"/_search/pipeline/{raw_id}"), json=PIPELINE)
    assert opensearch_error(response, 400, "illegal_argument_exception").startswith("invalid search pipeline id [")
    assert cluster.changes() == []  # not even the rights check
    listed = await client.get("/_search/pipeline")
    assert (listed.status_code, listed.json()) == (200, {})


async def test_ordinary_ids_are_kept(client: httpx.AsyncClient) -> None:
    for pipeline_id in ("answers", "answers-v2.1", "my_pipeline", "ümlaut"):
        response = await client.put(f"/_search/pipeline/{pipeline_id}", json=PIPELINE)
        assert (response.status_code, response.json()) == (200, {"acknowledged": True})
    listed = (await client.get("/_search/pipeline")).json()
    assert listed == dict.fromkeys(["answers", "answers-v2.1", "my_pipeline", "ümlaut"], PIPELINE)


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
async def test_bodies_answerbox_reads_must_be_json(
    client: httpx.AsyncClient, cluster: FakeOpenSearch, content_type: str | None
) -> None:
    """A cross-site form can post text/plain or a form, never JSON: such posts are refused."""
    headers = {"content-type": content_type} if content_type else {}
    body = b'{"response_processors": [{"cited_answer": {}}]}'
    for response in (
        await client.put("/_search/pipeline/p", content=body, headers=headers),
        await client.post("/any/_answerbox/stream?search_pipeline=p", content=b"{}", headers=headers),
    ):
        reason = opensearch_error(response, 406, "illegal_argument_exception")
        assert reason == f"Content-Type header [{content_type or ''}] is not supported: send application/json"
    assert cluster.changes() == []
    assert (await client.get("/_search/pipeline/p")).status_code == 404
