"""Byte-exact passthrough of every request answerbox does not handle itself.

Its own HTTP/1.1 client (``http/upstream``) rather than opensearch-py: the client must not
parse or re-encode bodies, so `_cat` text, NDJSON `_bulk` and compressed bodies come back
exactly as OpenSearch sent them, streamed in both directions over one pooled connection set.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator, Iterable

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Message, Send

from answerbox.core.config import Limits, OpenSearchSettings
from answerbox.core.errors import AnswerboxError, InvalidRequest, RequestTimeout, UpstreamTimeout, UpstreamUnavailable
from answerbox.core.loop_timeouts import within
from answerbox.http.bodies import read_body
from answerbox.http.upstream import UpstreamError, UpstreamPool, UpstreamResponse, UpstreamTimeoutError

__all__ = ["Passthrough"]

logger = logging.getLogger(__name__)

# RFC 9110 §7.6.1 connection-specific headers; never forwarded by a proxy. Bytes, lower case: the
# ASGI server gives header names so, and matching them undecoded costs every request less.
# Content-Length too: the client frames the body it sends itself. Expect: uvicorn already
# answered the caller's 100-continue, and the body goes on whole.
_HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"host",
    }
)
_FRAMING = frozenset({b"content-length", b"expect"})
_NOT_FORWARDED = _HOP_BY_HOP | _FRAMING
# ``Connection`` values that name no other header: a keep-alive client's every request has one.
_PLAIN_CONNECTION = frozenset({b"keep-alive", b"close"})
# The server (uvicorn) dates every response answerbox sends, so OpenSearch's Date would make a
# second one of a field RFC 9110 §6.6.1 allows once; nginx drops the upstream's the same way.
_NOT_RETURNED = _HOP_BY_HOP | {b"date"}


# Responses up to this size are buffered; larger or unsized ones stream.
_BUFFER_BYTES = 256 * 1024


async def _release(response: UpstreamResponse) -> None:
    # An async callable: Starlette would run a plain function in its thread pool.
    response.release()


# What a proxy in front of OpenSearch says about the caller: OpenSearch's proxy authentication
# believes these from a trusted proxy's address, which answerbox's may be; a caller's own would
# then be an identity of its choosing.
_PROXY_IDENTITY = (b"x-proxy-user", b"x-proxy-roles", b"x-forwarded-")


def _forwardable(raw: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The caller's headers (the ASGI scope's: names in lower case) less the hop-by-hop ones (those
    RFC 9110 names and those its ``Connection`` header names), the body's framing, and any claim
    to a proxy-given identity."""
    pairs = list(raw)
    named = {
        token
        for k, v in pairs
        if k == b"connection" and v.lower() not in _PLAIN_CONNECTION
        for token in (part.strip().lower() for part in v.split(b","))
    }
    return [
        (k, v) for k, v in pairs if k not in _NOT_FORWARDED and k not in named and not k.startswith(_PROXY_IDENTITY)
    ]


def _body_length(raw: Iterable[tuple[bytes, bytes]]) -> tuple[bool, int | None]:
    """Whether the caller sent a body, and its length when it said (None: chunked)."""
    has_body, length = False, None
    for name, value in raw:
        if name == b"content-length":
            has_body, length = True, int(value)
        elif name == b"transfer-encoding":
            return True, None
    return has_body, length


async def _arriving(stream: AsyncIterator[bytes], idle_s: float) -> AsyncIterator[bytes]:
    """A streamed request body, each part of it within ``idle_s`` of the one before: a sender that
    stalls would hold its OpenSearch connection, one of the pool's, for as long as it liked."""
    parts = aiter(stream)
    while True:
        try:
            async with within(idle_s):
                part = await anext(parts)
        except StopAsyncIteration:
            return
        except TimeoutError:
            raise RequestTimeout(
                f"the request body stalled for {idle_s:g}s (limits.body_timeout_s); it was not sent on whole"
            ) from None
        yield part


class _StreamedAnswer(StreamingResponse):
    """OpenSearch's answer streamed to a caller who must keep reading it: a part the caller leaves
    unread for ``write_timeout`` ends the exchange (the OpenSearch connection is closed and its
    slot freed; uvicorn closes the caller's). Callers that never read would otherwise hold the
    pool's every connection, and every other request would wait for one."""

    def __init__(self, upstream: UpstreamResponse, write_timeout: float) -> None:
        super().__init__(upstream.chunks(), status_code=upstream.status, background=BackgroundTask(_release, upstream))
        self._upstream = upstream
        self._write_timeout = write_timeout

    async def stream_response(self, send: Send) -> None:
        async def sent(message: Message) -> None:
            async with within(self._write_timeout):
                await send(message)

        try:
            await sent({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            async for chunk in self.body_iterator:
                await sent({"type": "http.response.body", "body": chunk, "more_body": True})
            await sent({"type": "http.response.body", "body": b"", "more_body": False})
        except TimeoutError:
            logger.info(
                "a caller read none of a streamed answer for %gs: the exchange is abandoned", self._write_timeout
            )
        finally:
            self._upstream.release()


def _ssl(settings: OpenSearchSettings) -> ssl.SSLContext | None:
    if not settings.url.startswith("https://"):
        return None
    context = ssl.create_default_context(cafile=str(settings.ca_certs) if settings.ca_certs else None)
    if not settings.verify_certs and not settings.ca_certs:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _answerbox_error(exc: UpstreamError) -> AnswerboxError:
    """The client's failure as answerbox's error (OpenSearch's shape, hosts left out)."""
    if isinstance(exc, UpstreamTimeoutError):
        return UpstreamTimeout.after(exc)
    return UpstreamUnavailable.unreachable(exc)


class Passthrough:
    """Forwards a Starlette request to OpenSearch and streams the answer back unchanged."""

    def __init__(self, settings: OpenSearchSettings, limits: Limits) -> None:
        self._limits = limits
        self._pool = UpstreamPool(
            settings.url,
            ssl_context=_ssl(settings),
            limit=settings.max_connections,
            connect_timeout=settings.connect_timeout_s,
            read_timeout=settings.request_timeout_s,
        )

    async def forward(self, request: Request, body: bytes | None = None) -> Response:
        """Send ``request`` upstream; ``body`` replaces the request stream when already read."""
        scope = request.scope
        content: bytes | AsyncIterator[bytes] | None = body
        length = None
        if body is None:
            has_body, length = _body_length(scope["headers"])
            if not has_body:
                content = None
            elif length is not None and length <= self._limits.max_request_bytes:
                # Read whole before a connection is taken: a slow sender holds only its own socket.
                content = await read_body(request, self._limits)
            else:  # a large or chunked body streams, each part within the body timeout
                content = _arriving(request.stream(), self._limits.body_timeout_s)
        # Path and query string go on as the caller wrote them (still percent-encoded), not
        # decoded and re-encoded: a %00 stays three characters.
        target = scope.get("raw_path") or scope["path"].encode()
        if scope["query_string"]:
            target += b"?" + scope["query_string"]
        # Plain try blocks, not a context manager: this is every passthrough request's path.
        try:
            upstream = await self._pool.request(
                scope["method"], target, _forwardable(scope["headers"]), content, length=length
            )
        except ValueError as exc:  # a request line or header with control characters
            raise InvalidRequest(f"the request cannot be forwarded: {exc}") from exc
        except UpstreamError as exc:
            raise _answerbox_error(exc) from exc
        response: Response
        if upstream.content_length is not None and upstream.content_length <= _BUFFER_BYTES:
            # Small bodies are read whole: streaming costs a task group per response.
            try:
                response = Response(await upstream.read(), status_code=upstream.status)
            except UpstreamError as exc:
                raise _answerbox_error(exc) from exc
        else:
            response = _StreamedAnswer(upstream, self._limits.body_timeout_s)
        # A list, not a dict: repeated headers (Set-Cookie, Warning) must all come back.
        response.raw_headers = [(k, v) for k, v in upstream.headers if k.lower() not in _NOT_RETURNED]
        return response

    async def aclose(self) -> None:
        await self._pool.aclose()
