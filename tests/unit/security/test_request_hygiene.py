"""What a request may not do to answerbox or through it, in-process against the fake cluster:
post a pipeline search from a cross-site form or in the URL, hold a request with a body that does not
arrive, ask for more hits than answerbox reads, learn internal hosts or an LLM provider's
words from an error. What needs a real socket (a huge body answered with a 413, not a reset)
and the passthrough's headers stay in tests/security/test_request_hygiene.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.support.processors import registry_with_test_processors
from tests.support.scripted_llm import ScriptedLLM
from tests.unit.asgi import closed_port, in_process, opensearch_error
from tests.unit.fake_opensearch import FakeOpenSearch

LABEL = {"response_processors": [{"label_hits": {"label": "seen"}}]}
INLINE = {"search_pipeline": LABEL, "query": {"match": {"body": "spice"}}}


@pytest.fixture
def cluster() -> FakeOpenSearch:
    cluster = FakeOpenSearch()
    cluster.index_docs("books", [{"_id": "dune", "body": "Spice is mined on Arrakis."}])
    return cluster


@pytest.fixture
async def client(cluster: FakeOpenSearch) -> AsyncIterator[httpx.AsyncClient]:
    async with in_process(cluster=cluster, registry=registry_with_test_processors()) as client:
        yield client


def _labelled(response: httpx.Response) -> list[tuple[str, list[str]]]:
    assert response.status_code == 200, response.text
    return [(h["_id"], h["fields"]["label"]) for h in response.json()["hits"]["hits"]]


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""]
)
async def test_a_pipeline_search_from_a_cross_site_form_is_refused(
    client: httpx.AsyncClient, cluster: FakeOpenSearch, content_type: str
) -> None:
    """A form can post text/plain across sites with the browser's cached credentials; OpenSearch
    refuses such a body (406), and so does answerbox before it runs a pipeline."""
    headers = {"content-type": content_type} if content_type else {}
    msearch = json.dumps({}) + "\n" + json.dumps(INLINE) + "\n"
    for path, body in (("/books/_search", json.dumps(INLINE)), ("/books/_msearch", msearch)):
        response = await client.post(path, content=body, headers=headers)
        reason = opensearch_error(response, 406, "illegal_argument_exception")
        media_type = content_type.split(";")[0]
        assert reason == f"Content-Type header [{media_type}] is not supported: send application/json"
    assert cluster.sent("/books/*") == []
    assert _labelled(await client.post("/books/_search", json=INLINE)) == [("dune", ["seen"])]
    answered = await client.post("/books/_msearch", content=msearch, headers={"content-type": "application/x-ndjson"})
    assert answered.status_code == 200, answered.text
    (line,) = answered.json()["responses"]
    assert [(h["_id"], h["fields"]["label"]) for h in line["hits"]["hits"]] == [("dune", ["seen"])]


async def test_a_pipeline_search_in_the_url_runs_no_pipeline(
    client: httpx.AsyncClient, cluster: FakeOpenSearch
) -> None:
    """A cross-site page can make a browser GET any URL: a body in OpenSearch's ``source``
    parameter is never one answerbox runs. It goes on as sent (here to an unreachable
    passthrough), and answerbox itself searched nothing (nor looked up the index's default
    pipeline: tests/security/test_request_hygiene.py has the default over real HTTP)."""
    params = {"source": json.dumps(INLINE), "source_content_type": "application/json"}
    response = await client.get("/books/_search", params=params)
    assert opensearch_error(response, 502, "connect_exception") == "OpenSearch is unreachable"
    assert cluster.sent("/books/_search") == []


async def test_a_body_that_does_not_arrive_in_time_is_a_408(cluster: FakeOpenSearch) -> None:
    never = asyncio.Event()

    async def stalled() -> AsyncIterator[bytes]:
        yield b'{"query": '
        await never.wait()  # the rest never comes

    async with in_process(cluster=cluster, limits={"body_timeout_s": 0.01}) as client:
        response = await client.post("/books/_search", content=stalled(), headers={"content-type": "application/json"})
    reason = opensearch_error(response, 408, "timeout_exception")
    assert reason == "the request body did not arrive within 0.01s (limits.body_timeout_s)"
    assert cluster.sent("/books/*") == []


async def test_a_pipeline_search_may_not_ask_for_more_hits_than_answerbox_reads(
    client: httpx.AsyncClient, cluster: FakeOpenSearch
) -> None:
    for body, params in (
        ({**INLINE, "size": 5000}, ""),
        ({**INLINE, "from": 900, "size": 200}, ""),
        (INLINE, "?size=2000"),
    ):
        response = await client.post(f"/books/_search{params}", json=body)
        assert "limits.max_search_size" in opensearch_error(response, 400, "illegal_argument_exception")
    assert cluster.sent("/books/*") == []
    assert _labelled(await client.post("/books/_search", json={**INLINE, "size": 100})) == [("dune", ["seen"])]


async def test_errors_name_no_internal_host() -> None:
    port = closed_port()
    async with in_process(opensearch={"url": f"http://127.0.0.1:{port}"}) as client:
        inline = {"search_pipeline": {"request_processors": []}, "query": {"match_all": {}}}
        for response in (await client.get("/_cat/indices"), await client.post("/books/_search", json=inline)):
            assert opensearch_error(response, 502, "connect_exception") == "OpenSearch is unreachable"
            assert str(port) not in response.text


async def test_warnings_never_repeat_an_llm_providers_words(cluster: FakeOpenSearch) -> None:
    llm = ScriptedLLM(fail=True, fail_status=401)
    async with in_process(cluster=cluster, llm_app=llm.app()) as client:
        pipeline: dict[str, Any] = {"request_processors": [{"llm_query_expansion": {}}]}
        response = await client.post(
            "/books/_search", json={"search_pipeline": pipeline, "query": {"match": {"body": "spice"}}}
        )
    assert response.status_code == 200, response.text
    assert [h["_id"] for h in response.json()["hits"]["hits"]] == ["dune"]
    (warning,) = response.json()["ext"]["answerbox"]["warnings"]
    assert "answered 401" in warning
    assert len(llm.calls) == 1
    assert "scripted failure" not in response.text
