"""Requests answerbox does not handle come back exactly as OpenSearch sent them. An unreachable
OpenSearch and a body over the limit are told in-process (tests/unit/http/test_search.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
from opensearchpy import OpenSearch
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from tests.conftest import AnswerboxFactory, RecordedFactory, bulk_index
from tests.support.servers import serve

BULK = (
    b'{"index":{"_index":"books","_id":"1"}}\n{"title":"Dune","body":"a desert planet"}\n'
    b'{"index":{"_index":"books","_id":"2"}}\n{"title":"Emma","body":"a comedy of manners"}\n'
)


def _same(a: httpx.Response, b: httpx.Response) -> None:
    assert a.status_code == b.status_code
    assert a.headers["content-type"] == b.headers["content-type"]
    assert a.content == b.content


def test_index_creation_matches_direct(answerbox: str, osmem_url: str, client: httpx.Client) -> None:
    mapping = {"mappings": {"properties": {"title": {"type": "text"}}}}
    via = client.put(f"{answerbox}/created", json=mapping)
    direct = client.put(f"{osmem_url}/created_direct", json=mapping)
    assert via.status_code == direct.status_code == 200
    assert via.headers["content-type"] == direct.headers["content-type"]
    assert via.json() == {**direct.json(), "index": "created"}
    _same(client.get(f"{answerbox}/created/_mapping"), client.get(f"{osmem_url}/created/_mapping"))


def test_bulk_ndjson_then_search_and_cat(answerbox: str, osmem_url: str, client: httpx.Client) -> None:
    bulk = client.post(
        f"{answerbox}/_bulk?refresh=true", content=BULK, headers={"content-type": "application/x-ndjson"}
    )
    assert bulk.status_code == 200
    assert bulk.json()["errors"] is False
    assert len(bulk.json()["items"]) == 2
    query = {"query": {"match": {"body": "desert"}}}
    via, direct = (
        client.post(f"{answerbox}/books/_search", json=query),
        client.post(f"{osmem_url}/books/_search", json=query),
    )
    assert via.json()["hits"] == direct.json()["hits"]
    assert [h["_id"] for h in via.json()["hits"]["hits"]] == ["1"]
    cat_via, cat_direct = (
        client.get(f"{answerbox}/_cat/indices?v&h=index,docs.count"),
        client.get(f"{osmem_url}/_cat/indices?v&h=index,docs.count"),
    )
    _same(cat_via, cat_direct)
    assert cat_via.headers["content-type"].startswith("text/plain")
    assert "books" in cat_via.text


def test_a_chunked_upload_and_head_requests_go_through_as_sent(
    answerbox: str, osmem_url: str, client: httpx.Client
) -> None:
    # A body of unknown length (chunked) goes on chunked; a HEAD's answer has a length and no body.
    lines = iter(BULK.replace(b"books", b"chunked_books").splitlines(keepends=True))
    bulk = client.post(
        f"{answerbox}/_bulk?refresh=true", content=lines, headers={"content-type": "application/x-ndjson"}
    )
    assert "content-length" not in bulk.request.headers
    assert bulk.status_code == 200
    assert bulk.json()["errors"] is False
    for index in ("chunked_books", "missing_books"):
        via, direct = client.head(f"{answerbox}/{index}"), client.head(f"{osmem_url}/{index}")
        assert (via.status_code, via.content) == (direct.status_code, b"")
        assert via.headers.get("content-length") == direct.headers.get("content-length")
    assert client.get(f"{answerbox}/chunked_books/_count").json()["count"] == 2


def test_large_bodies_stream_both_ways_unchanged(answerbox: str, osmem_url: str, client: httpx.Client) -> None:
    # The upload streams up with its length; an answer over 256 KiB (what is buffered whole) streams down.
    lines = b"".join(
        b'{"index":{"_index":"large_books","_id":"%d"}}\n{"body":"%b"}\n' % (i, b"sand dune %d " % i * 20)
        for i in range(2000)
    )
    assert len(lines) > 512 * 1024
    bulk = client.post(
        f"{answerbox}/_bulk?refresh=true", content=lines, headers={"content-type": "application/x-ndjson"}
    )
    assert bulk.status_code == 200
    assert bulk.json()["errors"] is False
    query = {"size": 2000, "query": {"match": {"body": "sand"}}}
    via = client.post(f"{answerbox}/large_books/_search", json=query)
    direct = client.post(f"{osmem_url}/large_books/_search", json=query)
    assert len(via.content) > 256 * 1024
    assert via.json()["hits"] == direct.json()["hits"]
    assert len(via.json()["hits"]["hits"]) == 2000


def test_errors_come_back_identical(
    answerbox: str, osmem_url: str, client: httpx.Client, opensearch: OpenSearch
) -> None:
    bulk_index(opensearch, "books", [{"title": "Dune"}])
    _same(client.get(f"{answerbox}/missing/_search"), client.get(f"{osmem_url}/missing/_search"))
    bad: dict[str, Any] = {"query": {"bogus": {}}}
    via, direct = (
        client.post(f"{answerbox}/books/_search", json=bad),
        client.post(f"{osmem_url}/books/_search", json=bad),
    )
    _same(via, direct)
    assert via.status_code == 400
    assert via.json()["error"]["root_cause"][0]["type"] == "parsing_exception"
    not_json = b"{this is not json"
    _same(
        client.post(f"{answerbox}/books/_search", content=not_json, headers={"content-type": "application/json"}),
        client.post(f"{osmem_url}/books/_search", content=not_json, headers={"content-type": "application/json"}),
    )


def test_every_answer_has_one_date_no_server_and_opensearch_s_json_type(
    answerbox: str, osmem_url: str, client: httpx.Client, opensearch: OpenSearch
) -> None:
    bulk_index(opensearch, "books", [{"title": "Dune"}])
    inline = {"search_pipeline": {"request_processors": []}, "query": {"match_all": {}}}
    answers = {
        "passthrough": (client.get(f"{answerbox}/books/_count"), client.get(f"{osmem_url}/books/_count")),
        "plain search": (client.post(f"{answerbox}/books/_search"), client.post(f"{osmem_url}/books/_search")),
        "its error": (client.get(f"{answerbox}/missing/_doc/1"), client.get(f"{osmem_url}/missing/_doc/1")),
        "a pipeline's": (client.post(f"{answerbox}/books/_search", json=inline), None),
        "answerbox's error": (client.post(f"{answerbox}/books/_search", json={"search_pipeline": 7}), None),
    }
    for kind, (via, direct) in answers.items():
        assert len(via.headers.get_list("date")) == 1, kind
        assert "server" not in via.headers, kind
        # Typed as OpenSearch types its JSON, charset included.
        assert via.headers["content-type"] == "application/json; charset=UTF-8", kind
        if direct is not None:
            assert set(via.headers) == set(direct.headers), kind
    assert answers["answerbox's error"][0].status_code == 400


def test_authorization_reaches_opensearch_untouched(recorded_answerbox: RecordedFactory, client: httpx.Client) -> None:
    recorder, url = recorded_answerbox()
    auth = "Basic YWxpY2U6czNjcjN0"
    client.get(f"{url}/_cat/indices", headers={"Authorization": auth})
    client.post(f"{url}/_search", json={"query": {"match_all": {}}}, headers={"Authorization": auth})
    forwarded = [r for r in recorder.requests if r.path in ("/_cat/indices", "/_search")]
    assert len(forwarded) == 2
    assert all(r.headers.get("authorization") == auth for r in forwarded)


def test_a_hanging_opensearch_times_out_instead_of_hanging(
    make_answerbox: AnswerboxFactory, client: httpx.Client
) -> None:
    async def stall(request: object) -> JSONResponse:
        await asyncio.sleep(3)
        return JSONResponse({})

    with serve(Starlette(routes=[Route("/{path:path}", stall, methods=["GET", "POST"])])) as slow:
        url = make_answerbox(opensearch={"url": slow, "request_timeout_s": 0.5})
        response = client.get(f"{url}/_cat/indices")
        assert response.status_code == 504
        assert response.json()["error"]["type"] == "timeout_exception"
        search = client.post(
            f"{url}/books/_search", json={"search_pipeline": {"request_processors": []}, "query": {"match_all": {}}}
        )
        assert search.status_code == 504
        assert search.json()["status"] == 504


def test_a_caller_gone_mid_answer_leaves_the_next_callers_answers_whole(
    make_answerbox: AnswerboxFactory, client: httpx.Client
) -> None:
    # One connection to OpenSearch: the one the first caller left must be closed and its slot freed,
    # or the next request would wait for ever, or read what is left of the first answer.
    piece = b"first answer " * 5000  # 65 KB

    async def big(request: Request) -> StreamingResponse:
        async def pieces() -> AsyncIterator[bytes]:
            for _ in range(64):
                yield piece
                await asyncio.sleep(0.01)

        return StreamingResponse(pieces(), media_type="text/plain")

    async def small(request: Request) -> JSONResponse:
        return JSONResponse({"answer": request.path_params["n"]})

    routes = [Route("/big", big), Route("/small/{n}", small)]
    with serve(Starlette(routes=routes)) as origin:
        url = make_answerbox(opensearch={"url": origin, "max_connections": 1, "request_timeout_s": 5})
        with client.stream("GET", f"{url}/big") as streamed:
            assert streamed.status_code == 200
            assert next(streamed.iter_raw()).startswith(b"first answer")
        for n in range(3):
            assert client.get(f"{url}/small/{n}", timeout=10).json() == {"answer": str(n)}
