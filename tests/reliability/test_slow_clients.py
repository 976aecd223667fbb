"""Slow or stalled clients never hold the passthrough's connections to OpenSearch: a body is read
whole before a connection is taken, a caller that stops reading its answer is dropped after
``limits.body_timeout_s``, and the wait for a free connection ends in a 504 after
``opensearch.connect_timeout_s``. Before, sockets that sent a ``PUT``'s headers and 5 bytes of
its body, or asked for a large document and never read it, made every other request, a plain
``GET /`` included, wait without end."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, contextmanager

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from tests.conftest import AnswerboxFactory
from tests.support.servers import serve
from tests.unit.asgi import opensearch_error

POOL = 4
CONNECT_TIMEOUT_S = 1.0
BODY_TIMEOUT_S = 2.0
SLACK_S = 1.0  # the acceptance's "usual time plus 1 s"


@contextmanager
def _sockets(url: str, count: int, request: bytes) -> Iterator[list[socket.socket]]:
    """``count`` connections to ``url``, each sent ``request`` and then left alone, reading nothing."""
    host, port = url.removeprefix("http://").split(":")
    with ExitStack() as stack:
        opened = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket())
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # fills at once when not read
            sock.connect((host, int(port)))
            sock.sendall(request)
            opened.append(sock)
        time.sleep(0.3)  # the server has read them all
        yield opened


def _timed(client: httpx.Client, method: str, url: str, **kwargs: object) -> tuple[httpx.Response, float]:
    started = time.perf_counter()
    response = client.request(method, url, timeout=30, **kwargs)  # type: ignore[arg-type]
    return response, time.perf_counter() - started


PUT = b"PUT /slow/_doc/1 HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
STALLED = {
    "sized": b'content-length: 100000\r\n\r\n{"a":',
    "chunked": b'transfer-encoding: chunked\r\n\r\n5\r\n{"a":\r\n',  # streamed on as it comes
}


def test_senders_that_stall_in_their_bodies_hold_no_connection_to_opensearch(
    make_answerbox: AnswerboxFactory, client: httpx.Client
) -> None:
    """The review's 100 sockets, against a pool of 4 connections: each would have held one."""
    url = make_answerbox(opensearch={"max_connections": POOL}, limits={"body_timeout_s": 30})
    _, usual = _timed(client, "GET", f"{url}/")
    search: dict[str, object] = {"query": {"match_all": {}}}
    stalled = (
        b'PUT /slow/_doc/1 HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n{"a":'
    )
    with _sockets(url, 100, stalled):
        root, took = _timed(client, "GET", f"{url}/")
        assert root.status_code == 200, root.text
        assert took < usual + SLACK_S
        found, took = _timed(client, "POST", f"{url}/_search", json=search)
        assert found.status_code == 200, found.text
        assert took < usual + SLACK_S


@pytest.mark.parametrize("framing", STALLED.values(), ids=STALLED.keys())
def test_a_sender_that_stalls_past_the_body_timeout_gets_a_408(
    make_answerbox: AnswerboxFactory, framing: bytes
) -> None:
    """The stalled body's own answer, in OpenSearch's shape: its connection is not kept for ever."""
    url = make_answerbox(limits={"body_timeout_s": BODY_TIMEOUT_S})
    with _sockets(url, 1, PUT + framing) as (sock,):
        sock.settimeout(BODY_TIMEOUT_S + 5)
        answer = sock.recv(65536)
    status, _, rest = answer.partition(b"\r\n")
    assert status == b"HTTP/1.1 408 Request Timeout", answer
    body = json.loads(rest.partition(b"\r\n\r\n")[2])
    assert body["status"] == 408
    assert "limits.body_timeout_s" in body["error"]["reason"]


def _big_origin() -> Starlette:
    piece = b"x" * 65536

    async def big(request: Request) -> StreamingResponse:
        async def pieces() -> AsyncIterator[bytes]:
            for _ in range(256):  # 16 MB: far more than any socket buffer holds
                yield piece
                await asyncio.sleep(0)

        return StreamingResponse(pieces(), media_type="application/json")

    async def small(request: Request) -> JSONResponse:
        return JSONResponse({"name": "origin"})

    return Starlette(routes=[Route("/big", big), Route("/", small)])


def test_callers_that_never_read_their_answers_delay_others_by_the_connect_timeout_at_most(
    make_answerbox: AnswerboxFactory, client: httpx.Client
) -> None:
    with serve(_big_origin()) as origin:
        url = make_answerbox(
            opensearch={"url": origin, "max_connections": POOL, "connect_timeout_s": CONNECT_TIMEOUT_S},
            limits={"body_timeout_s": BODY_TIMEOUT_S},
        )
        with _sockets(url, POOL, b"GET /big HTTP/1.1\r\nhost: x\r\n\r\n"):
            # Every connection to OpenSearch is held by a caller that does not read: a prompt 504.
            waited, took = _timed(client, "GET", f"{url}/")
            assert opensearch_error(waited, 504, "timeout_exception") == "OpenSearch did not answer in time"
            assert took < CONNECT_TIMEOUT_S + SLACK_S
            # Past the body timeout their exchanges are abandoned and the connections free again.
            time.sleep(BODY_TIMEOUT_S)
            root, took = _timed(client, "GET", f"{url}/")
            assert root.status_code == 200, root.text
            assert root.json() == {"name": "origin"}
