"""The passthrough's HTTP/1.1 client against an origin that sends exactly the bytes a test
scripts: every framing a server may use, and every way an exchange can end badly. The rule
under test throughout: a connection is reused only after a clean, whole exchange, so no
answer ever reaches the request after the one it belongs to."""

from __future__ import annotations

import asyncio
import gc
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httptools
import pytest
from answerbox.core.config import OpenSearchSettings
from answerbox.http.passthrough import _ssl
from answerbox.http.upstream import (
    UpstreamClosed,
    UpstreamError,
    UpstreamPool,
    UpstreamResponse,
    UpstreamTimeoutError,
)

TLS = Path(__file__).parents[1] / "support" / "tls"


@dataclass
class Seen:
    """One request as the origin read it, with the number of the connection it came on."""

    connection: int
    method: bytes
    target: bytes
    headers: dict[bytes, bytes]
    body: bytes = b""


@dataclass
class Reply:
    data: bytes = b""
    close: bool = False  # close the connection after writing ``data``


@dataclass
class _Parsing:
    connection: int
    headers: dict[bytes, bytes] = field(default_factory=dict)
    target: bytes = b""
    body: bytearray = field(default_factory=bytearray)
    done: list[Seen] = field(default_factory=list)

    def on_url(self, url: bytes) -> None:
        self.target += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.lower()] = value

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        self.done.append(Seen(self.connection, b"", self.target, dict(self.headers), bytes(self.body)))
        self.headers, self.target, self.body = {}, b"", bytearray()


class ScriptedOrigin:
    """A loopback server that answers the n-th request it reads with ``reply(n, seen)``
    (None: says nothing), and keeps every request and every connection's writer."""

    def __init__(self, reply: Callable[[int, Seen], Reply | None]) -> None:
        self._reply = reply
        self.seen: list[Seen] = []
        self.writers: list[asyncio.StreamWriter] = []
        self.url = ""
        self._handlers: list[asyncio.Task[None]] = []
        self.arrived = asyncio.Event()  # set by the first request

    @asynccontextmanager
    async def running(self, tls: ssl.SSLContext | None = None) -> AsyncIterator[ScriptedOrigin]:
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=tls)
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        try:
            yield self
        finally:
            for writer in self.writers:
                writer.close()
            server.close()
            # Each handler sees its connection end and returns: none is left to be cancelled.
            await asyncio.gather(*self._handlers)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        self._handlers.append(asyncio.current_task())  # type: ignore[arg-type]
        parsing = _Parsing(len(self.writers) - 1)
        parser = httptools.HttpRequestParser(parsing)
        while data := await reader.read(65536):
            parser.feed_data(data)
            for seen in parsing.done:
                seen.method = parser.get_method()
                self.seen.append(seen)
                self.arrived.set()
                reply = self._reply(len(self.seen) - 1, seen)
                if reply is None:
                    continue
                writer.write(reply.data)
                await writer.drain()
                if reply.close:
                    writer.close()
                    return
            parsing.done.clear()


def ok(body: bytes, *headers: bytes) -> Reply:
    return Reply(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n%b\r\n%b" % (len(body), b"".join(headers), body))


def pool(url: str, *, limit: int = 4, read_timeout: float = 5.0) -> UpstreamPool:
    return UpstreamPool(url, ssl_context=None, limit=limit, connect_timeout=5.0, read_timeout=read_timeout)


async def get(upstream: UpstreamPool, target: bytes = b"/", method: str = "GET", body: bytes | None = None) -> bytes:
    response = await upstream.request(method, target, [(b"accept", b"*/*")], body)
    return await response.read()


async def test_a_connection_carries_the_next_request_once_its_answer_is_read() -> None:
    async with ScriptedOrigin(lambda n, seen: ok(b"answer %d" % n)).running() as origin:
        upstream = pool(origin.url)
        assert [await get(upstream, b"/a?x=%2F"), await get(upstream, b"/b")] == [b"answer 0", b"answer 1"]
        assert [seen.connection for seen in origin.seen] == [0, 0]
        first = origin.seen[0]
        assert first.target == b"/a?x=%2F"  # as given, still percent-encoded
        assert first.headers == {b"host": origin.url.removeprefix("http://").encode(), b"accept": b"*/*"}
        await upstream.aclose()


@pytest.mark.parametrize(
    ("reply", "body"),
    [
        (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
            b"hello world",
        ),
        (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\nx-final: 1\r\n\r\nok", b"ok"),
        (b"HTTP/1.1 204 No Content\r\n\r\n", b""),
    ],
    ids=["chunked", "after 100 Continue", "204"],
)
async def test_each_framing_is_read_whole_and_the_connection_kept(reply: bytes, body: bytes) -> None:
    async with ScriptedOrigin(lambda n, seen: Reply(reply) if n == 0 else ok(b"next")).running() as origin:
        upstream = pool(origin.url)
        response = await upstream.request("GET", b"/", [], None)
        assert response.status in (200, 204)
        assert b"continue" not in b"".join(v for _, v in response.headers).lower()
        assert await response.read() == body
        assert await get(upstream) == b"next"
        assert [seen.connection for seen in origin.seen] == [0, 0]
        await upstream.aclose()


async def test_an_answer_delimited_by_the_close_is_read_to_its_end_and_its_connection_dropped() -> None:
    def reply(n: int, seen: Seen) -> Reply:
        if n == 0:
            return Reply(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nall of it", close=True)
        return ok(b"next")

    async with ScriptedOrigin(reply).running() as origin:
        upstream = pool(origin.url)
        response = await upstream.request("GET", b"/", [], None)
        pieces = []
        async for piece in response.chunks():
            pieces.append(piece)
            await asyncio.sleep(0)  # a caller that yields between pieces, as a streamed response does
        assert b"".join(pieces) == b"all of it"
        assert await get(upstream) == b"next"
        assert [seen.connection for seen in origin.seen] == [0, 1]
        await upstream.aclose()


async def test_a_head_answer_has_no_body_though_it_gives_a_length() -> None:
    def reply(n: int, seen: Seen) -> Reply:
        return Reply(b"HTTP/1.1 200 OK\r\ncontent-length: 42\r\n\r\n") if seen.method == b"HEAD" else ok(b"next")

    async with ScriptedOrigin(reply).running() as origin:
        upstream = pool(origin.url)
        response = await upstream.request("HEAD", b"/books", [], None)
        assert (response.status, response.content_length, await response.read()) == (200, 42, b"")
        assert await get(upstream) == b"next"
        assert [seen.connection for seen in origin.seen] == [0, 0]
        await upstream.aclose()


def _release(response: UpstreamResponse) -> None:
    response.release()


def _drop(response: UpstreamResponse) -> None:
    # As a streamed response whose caller went away before its first byte was sent: its body's
    # iterator made and never started, nothing released; the last reference goes here.
    response.chunks()


@pytest.mark.parametrize("end", [_release, _drop], ids=["released", "dropped unreleased"])
async def test_an_answer_left_before_its_end_closes_its_connection_and_frees_its_slot(
    end: Callable[[UpstreamResponse], None],
) -> None:
    def reply(n: int, seen: Seen) -> Reply:
        return Reply(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhalf") if n == 0 else ok(b"answer %d" % n)

    async with ScriptedOrigin(reply).running() as origin:
        upstream = pool(origin.url, limit=1)
        end(await upstream.request("GET", b"/", [], None))
        assert await asyncio.wait_for(get(upstream), 5) == b"answer 1"
        assert [seen.connection for seen in origin.seen] == [0, 1]
        await upstream.aclose()


async def test_an_answer_released_unread_while_reading_was_paused_leaves_its_connection_reading() -> None:
    # One byte over what the client reads ahead: reading pauses on the very bytes that end the answer.
    body = b"x" * (256 * 1024 + 1)
    async with ScriptedOrigin(lambda n, seen: ok(body) if n == 0 else ok(b"next")).running() as origin:
        upstream = pool(origin.url, read_timeout=2.0)
        response = await upstream.request("GET", b"/", [], None)
        await asyncio.sleep(0.3)  # the whole answer arrives, unread
        response.release()
        assert await get(upstream) == b"next"
        assert [seen.connection for seen in origin.seen] == [0, 0]
        await upstream.aclose()


async def test_an_answer_that_comes_before_the_upload_ends_is_the_callers() -> None:
    # OpenSearch may refuse an upload from its head (413) and close: that answer is what comes back.
    answered = asyncio.Event()

    async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 413 Request Entity Too Large\r\ncontent-length: 8\r\nconnection: close\r\n\r\ntoo long")
        await writer.drain()
        writer.close()
        answered.set()

    async def upload() -> AsyncIterator[bytes]:
        yield b"12"
        await answered.wait()
        await asyncio.sleep(0.1)  # the answer and the close reach the client
        yield b"345"

    server = await asyncio.start_server(refuse, "127.0.0.1", 0)
    upstream = pool(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")
    response = await upstream.request("PUT", b"/i/_doc/1", [], upload(), length=5)
    assert (response.status, await response.read()) == (413, b"too long")
    await upstream.aclose()
    server.close()


async def test_a_late_answer_to_a_cancelled_request_never_reaches_the_next_one() -> None:
    # The first request gets no answer until its caller has gone; the answer then comes anyway.
    async with ScriptedOrigin(lambda n, seen: None if n == 0 else ok(b"answer %d" % n)).running() as origin:
        upstream = pool(origin.url, limit=1)
        waiting = asyncio.create_task(get(upstream))
        await origin.arrived.wait()
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        origin.writers[0].write(ok(b"late answer 0").data)
        assert await get(upstream) == b"answer 1"
        assert [seen.connection for seen in origin.seen] == [0, 1]
        await upstream.aclose()


async def test_bytes_nobody_asked_for_drop_the_connection() -> None:
    # Extra bytes after an answer, in the same write or later on the idle connection: either way
    # they are never read as the next request's answer.
    def reply(n: int, seen: Seen) -> Reply:
        return Reply(ok(b"answer %d" % n).data + (ok(b"stale").data if n == 0 else b""))

    async with ScriptedOrigin(reply).running() as origin:
        upstream = pool(origin.url)
        assert await get(upstream) == b"answer 0"
        assert await get(upstream) == b"answer 1"
        origin.writers[1].write(ok(b"stale").data)
        await asyncio.sleep(0.05)
        assert await get(upstream) == b"answer 2"
        assert [seen.connection for seen in origin.seen] == [0, 1, 2]
        await upstream.aclose()


async def test_a_kept_alive_connection_closed_as_it_is_reused_is_retried_fresh_for_a_get_only() -> None:
    # The origin reads the second request on the first connection and closes without a word.
    def reply(n: int, seen: Seen) -> Reply:
        return Reply(close=True) if seen.connection == 0 and n > 0 else ok(b"answer %d" % n)

    async with ScriptedOrigin(reply).running() as origin:
        upstream = pool(origin.url)
        assert await get(upstream) == b"answer 0"
        assert await get(upstream) == b"answer 2"  # request 1 met the close; its retry is request 2
        assert [seen.connection for seen in origin.seen] == [0, 0, 1]

        assert await get(upstream) == b"answer 3"  # now on connection 1, kept alive
        origin.writers[1].close()  # ... which the origin then closes while it is idle
        await asyncio.sleep(0.05)
        assert await get(upstream, method="POST", body=b"{}") == b"answer 4"  # a fresh one: not reused
        assert (origin.seen[-1].connection, origin.seen[-1].body) == (2, b"{}")
        await upstream.aclose()

    async with ScriptedOrigin(lambda n, seen: ok(b"first") if n == 0 else Reply(close=True)).running() as origin:
        upstream = pool(origin.url)
        await get(upstream)
        with pytest.raises(UpstreamClosed):  # a POST may have done its work: never sent twice
            await get(upstream, method="POST", body=b"{}")
        assert len(origin.seen) == 2
        await upstream.aclose()


async def test_no_answer_in_the_read_timeout_is_a_timeout_and_frees_its_slot_once() -> None:
    async with ScriptedOrigin(lambda n, seen: None if n == 0 else ok(b"answer")).running() as origin:
        upstream = pool(origin.url, limit=1, read_timeout=0.2)
        with pytest.raises(UpstreamTimeoutError):
            await get(upstream)
        gc.collect()  # the timed-out exchange's response is gone: its slot must not come back twice
        assert await asyncio.gather(*(get(upstream) for _ in range(3))) == [b"answer"] * 3
        assert [seen.connection for seen in origin.seen] == [0, 1, 1, 1]
        await upstream.aclose()


async def test_an_answer_that_stops_halfway_is_an_error_not_a_short_body() -> None:
    cut = Reply(b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhalf", close=True)
    async with ScriptedOrigin(lambda n, seen: cut).running() as origin:
        upstream = pool(origin.url)
        with pytest.raises(UpstreamClosed):
            await get(upstream)
        await upstream.aclose()


async def test_a_line_break_in_a_header_or_a_space_in_the_target_is_refused_unsent() -> None:
    async with ScriptedOrigin(lambda n, seen: ok(b"")).running() as origin:
        upstream = pool(origin.url)
        for target, headers in [(b"/", [(b"x-a", b"1\r\nauthorization: admin")]), (b"/ HTTP/1.1", [])]:
            with pytest.raises(ValueError, match="line break"):
                await upstream.request("GET", target, headers, None)
        assert origin.seen == []
        await upstream.aclose()


async def _pieces(*parts: bytes) -> AsyncIterator[bytes]:
    for part in parts:
        yield part


async def test_a_streamed_body_goes_chunked_or_with_its_length_and_a_short_one_is_not_sent_as_whole() -> None:
    async with ScriptedOrigin(lambda n, seen: ok(b"answer %d" % n)).running() as origin:
        upstream = pool(origin.url)
        chunked = await upstream.request("POST", b"/_bulk", [], _pieces(b'{"index":{}}\n', b"", b'{"a":1}\n'))
        assert await chunked.read() == b"answer 0"
        sized = await upstream.request("PUT", b"/i", [], _pieces(b"12", b"345"), length=5)
        assert await sized.read() == b"answer 1"
        framed = [(s.headers.get(b"transfer-encoding"), s.headers.get(b"content-length"), s.body) for s in origin.seen]
        assert framed == [(b"chunked", None, b'{"index":{}}\n{"a":1}\n'), (None, b"5", b"12345")]
        with pytest.raises(UpstreamError):
            await upstream.request("PUT", b"/i", [], _pieces(b"12"), length=5)
        assert await get(upstream) == b"answer 2"
        assert origin.seen[-1].connection == 1  # the broken one was not reused
        await upstream.aclose()


async def test_a_large_answer_streams_in_pieces() -> None:
    big = bytes(range(256)) * 16_384  # 4 MiB
    async with ScriptedOrigin(lambda n, seen: ok(big)).running() as origin:
        upstream = pool(origin.url)
        response = await upstream.request("GET", b"/", [], None)
        pieces = [piece async for piece in response.chunks()]
        assert len(pieces) > 1
        assert b"".join(pieces) == big
        assert await get(upstream) == big
        assert [seen.connection for seen in origin.seen] == [0, 0]
        await upstream.aclose()


async def test_no_more_than_the_limit_of_connections_open_at_once() -> None:
    async with ScriptedOrigin(lambda n, seen: ok(b"answer")).running() as origin:
        upstream = pool(origin.url, limit=2)
        assert await asyncio.gather(*(get(upstream) for _ in range(6))) == [b"answer"] * 6
        assert len(origin.writers) <= 2
        await upstream.aclose()


async def test_tls_is_verified_against_the_ca_given_and_refused_without_it() -> None:
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(TLS / "loopback.crt", TLS / "loopback.key")
    async with ScriptedOrigin(lambda n, seen: ok(b"over tls")).running(server_side) as origin:
        trusted = OpenSearchSettings(url=origin.url, ca_certs=TLS / "loopback.crt")
        unchecked = OpenSearchSettings(url=origin.url, verify_certs=False)
        for settings in (trusted, unchecked):
            upstream = UpstreamPool(origin.url, ssl_context=_ssl(settings), limit=1, connect_timeout=5, read_timeout=5)
            assert await get(upstream) == b"over tls"
            await upstream.aclose()
        strict = UpstreamPool(
            origin.url, ssl_context=_ssl(OpenSearchSettings(url=origin.url)), limit=1, connect_timeout=5, read_timeout=5
        )
        with pytest.raises(UpstreamError, match="CERTIFICATE_VERIFY_FAILED"):
            await get(strict)  # the system's CAs do not know this certificate: no request goes
        assert len(origin.seen) == 2
        await strict.aclose()
