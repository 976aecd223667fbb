"""Sockets that never finish a request's headers, over real loopback sockets: each is closed
``limits.header_timeout_s`` after it opened (or after a later request's first byte), so idle or
trickling clients cannot keep ``limits.max_connections`` full and everyone else answered 503.
uvicorn's own keep-alive timeout starts only after a response: such sockets stayed open for good.
A search whose body stalls is answered 408 at ``limits.body_timeout_s``, on the server's own loop."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from tests.conftest import AnswerboxFactory

CONNECTIONS = 4
HEADER_TIMEOUT_S = 0.5
# How long past the timeout a socket may take to be closed (a loaded 2-core machine), and how
# long a test waits at most.
SLACK_S = 3.0
STATS = "/_answerbox/stats/search_pipeline"
Connect = Callable[[], socket.socket]
REQUEST = f"GET {STATS} HTTP/1.1\r\nHost: answerbox\r\n\r\n".encode()


@pytest.fixture
def url(make_answerbox: AnswerboxFactory) -> str:
    return make_answerbox(limits={"max_connections": CONNECTIONS, "header_timeout_s": HEADER_TIMEOUT_S})


@pytest.fixture
def connect(url: str) -> Iterator[Connect]:
    host, port = url.removeprefix("http://").split(":")
    opened: list[socket.socket] = []

    def open_one() -> socket.socket:
        opened.append(socket.create_connection((host, int(port)), timeout=SLACK_S))
        return opened[-1]

    yield open_one
    for sock in opened:
        sock.close()


def _closed_by_server(sock: socket.socket, within_s: float) -> bool:
    """Whether the server closes ``sock`` within ``within_s``, whatever it sends before."""
    sock.settimeout(within_s)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True


def _trickled_until_closed(sock: socket.socket, data: bytes) -> float | None:
    """Sends ``data`` a byte at a time, 20 ms apart; the seconds until the server closed the
    socket, or None if it was still open when ``data`` ran out or the slack was spent."""
    started = time.monotonic()
    for byte in data:
        if time.monotonic() - started > HEADER_TIMEOUT_S + SLACK_S:
            return None
        try:
            sock.sendall(bytes([byte]))
        except (BrokenPipeError, ConnectionResetError):
            return time.monotonic() - started
        if _closed_by_server(sock, 0.02):
            return time.monotonic() - started
    return None


def _response(sock: socket.socket) -> bytes:
    """One response with a content-length, read whole."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(4096)
    head, _, body = data.partition(b"\r\n\r\n")
    lengths = [line for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:")]
    length = int(lengths[0].split(b":")[1])
    while len(body) < length:
        body += sock.recv(4096)
    return head


def test_idle_sockets_are_closed_and_a_request_is_served_again(
    url: str, connect: Connect, client: httpx.Client
) -> None:
    opened = time.monotonic()
    idle = [connect() for _ in range(CONNECTIONS)]
    # Every socket of the limit is taken: until they are closed, a request would be answered 503.
    assert all(_closed_by_server(sock, HEADER_TIMEOUT_S + SLACK_S) for sock in idle)
    assert time.monotonic() - opened >= HEADER_TIMEOUT_S * 0.9
    assert client.get(f"{url}{STATS}").status_code == 200
    # A request's time is its headers': a body that takes longer still arrives, and is answered.
    sock = connect()
    sock.sendall(b"PUT /_search/pipeline/slow HTTP/1.1\r\nHost: answerbox\r\ncontent-type: application/json\r\n"
                 b"content-length: 2\r\n\r\n{")  # fmt: skip
    time.sleep(HEADER_TIMEOUT_S * 2)
    sock.sendall(b"}")
    assert _response(sock).startswith(b"HTTP/1.1 ")


def test_headers_trickled_a_byte_at_a_time_are_cut_off(connect: Connect) -> None:
    endless = REQUEST.removesuffix(b"\r\n") + b"x-slow: " + b"a" * 10_000
    took = _trickled_until_closed(connect(), endless)
    assert took is not None
    assert took < HEADER_TIMEOUT_S + SLACK_S


def test_a_later_request_trickled_on_a_kept_alive_socket_is_cut_off(connect: Connect) -> None:
    sock = connect()
    sock.sendall(REQUEST)
    assert _response(sock).startswith(b"HTTP/1.1 200")
    # The keep-alive timeout stops at the next request's first byte; the header timeout starts.
    endless = REQUEST.removesuffix(b"\r\n") + b"x-slow: " + b"a" * 10_000
    took = _trickled_until_closed(sock, endless)
    assert took is not None
    assert took < HEADER_TIMEOUT_S + SLACK_S


def test_search_bodies_that_stall_are_answered_408_each_at_its_deadline(make_answerbox: AnswerboxFactory) -> None:
    """The body deadlines of one server share one timer on its own loop (uvicorn's, uvloop where
    installed): two searches whose bodies stop short, the second begun after the first, are each
    answered 408 in OpenSearch's shape at their own deadline, not before, and the server serves on."""
    body_timeout_s = 0.4
    url = make_answerbox(limits={"body_timeout_s": body_timeout_s})
    host, port = url.removeprefix("http://").split(":")
    stalled = b"POST /books/_search HTTP/1.1\r\nHost: answerbox\r\ncontent-type: application/json\r\n"
    stalled += b'content-length: 40\r\n\r\n{"query": '
    first = socket.create_connection((host, int(port)), timeout=body_timeout_s + SLACK_S)
    first.sendall(stalled)
    first_sent = time.monotonic()
    time.sleep(body_timeout_s / 2)
    second = socket.create_connection((host, int(port)), timeout=body_timeout_s + SLACK_S)
    second.sendall(stalled)
    second_sent = time.monotonic()
    for sock, sent in ((first, first_sent), (second, second_sent)):
        head = _response(sock)
        assert head.startswith(b"HTTP/1.1 408"), head
        assert time.monotonic() - sent >= body_timeout_s * 0.9
        sock.close()
    with httpx.Client(timeout=SLACK_S) as http:
        response = http.post(f"{url}/books/_search", json={"query": {"match_all": {}}})
    # osmem's answer (no such index): answerbox forwarded it.
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "index_not_found_exception"
