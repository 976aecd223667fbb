"""The passthrough's HTTP/1.1 client: a pool of keep-alive connections to OpenSearch.

Hand-written on httptools (the parser uvicorn already runs) rather than aiohttp: per request
aiohttp's client cost more CPU than all of answerbox's own layers (``bench/proxy_overhead.py``),
for features the passthrough must not use (cookies, redirects, decompression, body encoding).

The rule that keeps callers apart: a connection goes back to the pool only when its request
was sent whole before its response began, that response was read to its end, and both sides
keep the connection alive. Anything else (an error, a timeout, a cancelled caller, a body left
unread, bytes nobody asked for) closes it, so no response can reach the wrong caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import weakref
from collections import deque
from collections.abc import AsyncIterator
from functools import partial
from typing import cast
from urllib.parse import urlsplit

import httptools

__all__ = ["UpstreamClosed", "UpstreamError", "UpstreamPool", "UpstreamResponse", "UpstreamTimeoutError"]

# Read from OpenSearch no further ahead than this while the caller is slower.
_HIGH_WATER = 256 * 1024
_WRITE_HIGH_WATER = 256 * 1024
# A retried request on a fresh connection: the methods RFC 9110 §9.2.2 calls idempotent.
_IDEMPOTENT = frozenset({b"GET", b"HEAD", b"PUT", b"DELETE", b"OPTIONS"})


class UpstreamError(Exception):
    """OpenSearch could not be reached, or what it sent is not HTTP/1.1."""


class UpstreamTimeoutError(UpstreamError):
    """No connection in ``connect_timeout``, or no more of the answer in ``read_timeout``."""


class UpstreamClosed(UpstreamError):
    """The connection closed before the answer was whole."""


class UpstreamResponse:
    """One answer: status and headers at once, the body read whole or as it arrives; always
    ``release`` it (reading to the end does), which keeps or closes its connection."""

    def __init__(self, connection: _Connection, exchange: int, *, head_only: bool) -> None:
        self.status = 0
        self.headers: list[tuple[bytes, bytes]] = []
        self.content_length: int | None = None
        self._connection = connection
        self._exchange = exchange
        self._loop = asyncio.get_running_loop()
        self._head_only = head_only
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._complete = False
        self._released = False

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])

    def __del__(self) -> None:
        # A response nobody read or released (its caller went away first): close, never reuse. On
        # the loop: the collector may run this on any thread, and the pool is not thread-safe.
        if not self._released:
            self._released = True
            with contextlib.suppress(RuntimeError):  # the loop is closed: so are its connections
                self._loop.call_soon_threadsafe(partial(self._connection.finish, self._exchange, complete=False))

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives; releases the connection at its end."""
        connection = self._connection
        try:
            while True:
                while self._chunks:
                    chunk = self._chunks.popleft()
                    self._buffered -= len(chunk)
                    connection.read_more(self._buffered)
                    yield chunk
                if self._complete:
                    return
                await connection.wait()
        finally:
            self.release()

    def release(self) -> None:
        """Hand the connection back (whole answer read) or close it (anything else); idempotent."""
        if not self._released:
            self._released = True
            self._connection.finish(self._exchange, complete=self._complete)

    # --- fed by the connection -----------------------------------------------------------

    def _body(self, data: bytes) -> None:
        self._chunks.append(data)
        self._buffered += len(data)
        self._connection.read_less(self._buffered)


class _Connection(asyncio.Protocol):
    """One TCP (or TLS) connection, one exchange at a time."""

    def __init__(self, pool: UpstreamPool) -> None:
        self._pool = pool
        self._transport: asyncio.Transport | None = None
        self._parser: httptools.HttpResponseParser | None = None
        # Weakly: a response its caller dropped unread ends its exchange (``__del__``), which a
        # reference from here would prevent while the transport keeps this protocol alive.
        self._current: weakref.ref[UpstreamResponse] | None = None
        self._exchange = 0
        self._waiter: asyncio.Future[None] | None = None
        self._error: UpstreamError | None = None
        self._headers_done = False
        self._body_unframed = False  # neither Content-Length nor chunked: the body ends with the connection
        self._saw_bytes = False  # of this exchange's answer
        self._sending = False
        self._early = False  # the answer began before the request was all sent
        self._write_paused = False
        self._read_paused = False
        self._in_use = False
        self.reusable = True

    # --- asyncio.Protocol ----------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not asyncio's class
        self._transport.set_write_buffer_limits(high=_WRITE_HIGH_WATER)

    def data_received(self, data: bytes) -> None:
        if self._parser is None:  # nobody asked: the server is closing, or is not speaking HTTP to us
            self.close()
            return
        self._saw_bytes = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(UpstreamError("OpenSearch switched protocols"))
        except httptools.HttpParserError as exc:
            self._fail(UpstreamError(f"OpenSearch's answer is not HTTP/1.1: {exc}"))

    def eof_received(self) -> None:
        # A body delimited by the connection's close ends here, before the transport is closing.
        if self._headers_done and self._body_unframed:
            self.on_message_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self.reusable = False
        self._pool.forget(self)
        response = self._response
        if response is not None and self._headers_done and self._body_unframed and exc is None:
            self.on_message_complete()  # as in eof_received, where a transport does not tell of the EOF
        elif response is not None and not response._complete:
            self._fail(UpstreamClosed("OpenSearch closed the connection before its answer was whole"))
        self._wake()

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._wake()

    # --- httptools callbacks -------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self._headers_done:  # a second answer to one request: this connection is not to be trusted again
            self.reusable = False

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._response is not None and not self._headers_done:
            self._response.headers.append((name, value))

    def on_headers_complete(self) -> None:
        response, parser, transport = self._response, self._parser, self._transport
        if response is None or parser is None or transport is None or self._headers_done:
            return
        status = parser.get_status_code()
        if 100 <= status < 200:  # an interim answer (100 Continue): the real one follows
            response.headers.clear()
            return
        response.status = status
        self._headers_done = True
        self._early = self._sending or transport.get_write_buffer_size() > 0
        framing = {name.lower() for name, _ in response.headers} & {b"content-length", b"transfer-encoding"}
        if b"content-length" in framing and b"transfer-encoding" not in framing:
            response.content_length = int(next(v for k, v in response.headers if k.lower() == b"content-length"))
        self._body_unframed = not framing and status not in (204, 304) and not response._head_only
        if response._head_only:  # the parser would wait for Content-Length bytes a HEAD never gets
            self._end(keep_alive=parser.should_keep_alive())
        self._wake()

    def on_body(self, body: bytes) -> None:
        if self._response is not None and not self._response._complete:
            self._response._body(body)
            self._wake()

    def on_message_complete(self) -> None:
        response, parser = self._response, self._parser
        if response is None or parser is None or not self._headers_done or response._complete:
            return  # an interim answer's end, or a HEAD's Content-Length the parser still counted
        self._end(keep_alive=parser.should_keep_alive() and not self._body_unframed)

    # --- used by the pool and the response -----------------------------------------------

    async def send(
        self, method: bytes, head: bytes, body: bytes | AsyncIterator[bytes], *, length: int | None
    ) -> UpstreamResponse:
        """Write the request and wait for the answer's status and headers."""
        transport = self._transport
        assert transport is not None
        self._exchange += 1
        response = UpstreamResponse(self, self._exchange, head_only=method == b"HEAD")
        self._current = weakref.ref(response)
        self._parser = httptools.HttpResponseParser(self)
        self._saw_bytes = False
        self._sending = True
        if isinstance(body, bytes):
            transport.writelines((head, body))
        else:
            await self._stream(head, body, length=length)
        self._sending = False
        while not self._headers_done:
            self._raise_if_failed()
            await self._wait()
        return response

    async def wait(self) -> None:
        """Until more of the answer's body has come, or it ended."""
        self._raise_if_failed()
        await self._wait()
        self._raise_if_failed()

    def read_less(self, buffered: int) -> None:
        if buffered > _HIGH_WATER and not self._read_paused and self._transport is not None:
            self._read_paused = True
            self._transport.pause_reading()

    def read_more(self, buffered: int) -> None:
        if self._read_paused and buffered <= _HIGH_WATER // 2 and self._transport is not None:
            self._read_paused = False
            self._transport.resume_reading()

    def claim(self) -> None:
        """Taken from the pool for one exchange, which ``finish`` ends."""
        self._in_use = True
        self._current = None

    def finish(self, exchange: int, *, complete: bool) -> None:
        """Exchange number ``exchange`` is over: back to the pool only if it ended cleanly. Once
        only: a response's late release (its ``__del__``) after its exchange ended does nothing."""
        if not self._in_use or exchange != self._exchange:
            return
        self._in_use = False
        self._current = None
        self.read_more(0)  # an answer released with its body unread may have paused reading
        self._parser = None
        self._headers_done = False
        if not (complete and self.reusable and not self._early):
            self.close()
        self._pool.check_in(self)

    def close(self) -> None:
        self.reusable = False
        if self._transport is not None:
            self._transport.close()

    def abandon(self) -> None:
        """End the exchange in progress, whatever became of it, closing the connection."""
        self.finish(self._exchange, complete=False)

    @property
    def _response(self) -> UpstreamResponse | None:
        return None if self._current is None else self._current()

    @property
    def saw_bytes(self) -> bool:
        return self._saw_bytes

    # --- internals -----------------------------------------------------------------------

    def _end(self, *, keep_alive: bool) -> None:
        response = self._response
        if response is not None:
            response._complete = True
        if not keep_alive:
            self.reusable = False
        self._wake()

    def _fail(self, error: UpstreamError) -> None:
        self._error = self._error or error
        self.close()
        self._wake()

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._error
        if self._transport_closing() and (self._response is None or not self._response._complete):
            raise UpstreamClosed("OpenSearch closed the connection before its answer was whole")

    async def _stream(self, head: bytes, body: AsyncIterator[bytes], *, length: int | None) -> None:
        """A streamed body: chunked when its length is not known, else held to it. Cut short (an
        error, or an answer that came first and closed), it is not finished off as if whole."""
        transport = self._transport
        assert transport is not None
        transport.write(head)
        sent = 0
        async for chunk in body:
            if self._error is not None or transport.is_closing():
                break
            sent += len(chunk)
            if length is not None and sent > length:
                self._fail(UpstreamError(f"the request body is longer than its Content-Length's {length} bytes"))
                break
            if chunk:
                transport.write(b"%x\r\n%b\r\n" % (len(chunk), chunk) if length is None else chunk)
                await self._drain()
        else:
            if length is None:
                transport.write(b"0\r\n\r\n")
            elif sent != length:
                self._fail(UpstreamError(f"the request body was {sent} bytes, not its Content-Length's {length}"))
        self._raise_if_failed()

    async def _drain(self) -> None:
        while self._write_paused and self._error is None and not self._transport_closing():
            await self._wait()
        self._raise_if_failed()

    def _transport_closing(self) -> bool:
        return self._transport is None or self._transport.is_closing()

    async def _wait(self) -> None:
        """Until the connection has news (bytes read, room to write, its end), at most the read
        timeout: the one place an exchange's wait is bounded. A timed-out exchange is abandoned
        by whoever holds it, which closes the connection."""
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            async with asyncio.timeout(self._pool.read_timeout):
                await self._waiter
        except TimeoutError as exc:
            raise UpstreamTimeoutError("OpenSearch neither answered nor read in time") from exc
        finally:
            self._waiter = None

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class UpstreamPool:
    """Keep-alive connections to one origin, at most ``limit`` open at once."""

    def __init__(
        self, url: str, *, ssl_context: ssl.SSLContext | None, limit: int, connect_timeout: float, read_timeout: float
    ) -> None:
        parts = urlsplit(url)
        if parts.hostname is None:
            raise ValueError(f"no host in {url!r}")
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self._ssl = ssl_context
        # The authority as a Host header gives it; never the URL's user and password.
        self._host_header = parts.netloc.rpartition("@")[2].encode("idna")
        self._idle: list[_Connection] = []
        self._slots = asyncio.Semaphore(limit)
        self._connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self._closed = False

    async def request(
        self,
        method: str,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes | AsyncIterator[bytes] | None,
        *,
        length: int | None = None,
    ) -> UpstreamResponse:
        """Send one request. ``body``: bytes, a stream of ``length`` bytes (chunked when
        ``length`` is None), or None for a request without one. The caller must release the answer."""
        verb = method.encode("ascii")
        head = self._head(verb, target, headers, body, length)
        replayable = verb in _IDEMPOTENT and (body is None or isinstance(body, bytes))
        while True:
            connection, reused = await self._check_out()
            try:
                return await connection.send(verb, head, b"" if body is None else body, length=length)
            except UpstreamClosed:
                connection.abandon()
                # A kept-alive connection the server closed just as it was reused: once more, fresh.
                if not (reused and replayable and not connection.saw_bytes):
                    raise
            except BaseException:
                connection.abandon()
                raise

    def check_in(self, connection: _Connection) -> None:
        if connection.reusable and not self._closed:
            self._idle.append(connection)
        elif connection.reusable:  # the pool closed while it was out
            connection.close()
        self._slots.release()

    def forget(self, connection: _Connection) -> None:
        if connection in self._idle:
            self._idle.remove(connection)

    async def aclose(self) -> None:
        self._closed = True
        for connection in self._idle:
            connection.close()
        self._idle.clear()

    def _head(
        self,
        verb: bytes,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes | AsyncIterator[bytes] | None,
        length: int | None,
    ) -> bytes:
        if isinstance(body, bytes):
            framing = b"content-length: %d\r\n" % len(body)
        elif body is None:
            framing = b""
        elif length is None:
            framing = b"transfer-encoding: chunked\r\n"
        else:
            framing = b"content-length: %d\r\n" % length
        fields = b"".join(b"%b: %b\r\n" % pair for pair in headers)
        # The caller's request came through a strict parser, but a header or target with a line
        # break would split this request in two, so it is checked again here, where it is sent:
        # each field ends in the one CR and LF it may hold.
        if fields.count(b"\r") != len(headers) or fields.count(b"\n") != len(headers) or not _token(target):
            raise ValueError("a header or the target holds a line break or a space")
        return b"%b %b HTTP/1.1\r\nhost: %b\r\n%b%b\r\n" % (verb, target, self._host_header, framing, fields)

    async def _check_out(self) -> tuple[_Connection, bool]:
        """A connection, within the connect timeout all told: the wait for a free one too, so
        that callers who hold every connection (slow to read their answers) delay others by that
        much at most, never without end."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._connect_timeout
        if self._slots.locked():  # a timer only where there is a wait: this is every request's path
            try:
                async with asyncio.timeout_at(deadline):
                    await self._slots.acquire()
            except TimeoutError as exc:
                raise UpstreamTimeoutError("no free connection to OpenSearch in time: all are in use") from exc
        else:
            await self._slots.acquire()
        try:
            while self._idle:
                connection = self._idle.pop()
                if connection.reusable:
                    connection.claim()
                    return connection, True
            async with asyncio.timeout_at(deadline):
                _, protocol = await loop.create_connection(
                    lambda: _Connection(self),
                    self._host,
                    self._port,
                    ssl=self._ssl,
                    server_hostname=self._host if self._ssl else None,
                )
            protocol.claim()
            return protocol, False
        except TimeoutError as exc:
            self._slots.release()
            raise UpstreamTimeoutError("no connection to OpenSearch in time") from exc
        except OSError as exc:
            self._slots.release()
            raise UpstreamError(f"cannot connect to OpenSearch: {exc}") from exc
        except BaseException:
            self._slots.release()
            raise


def _token(target: bytes) -> bool:
    return not any(c in target for c in (b" ", b"\r", b"\n", b"\t"))
