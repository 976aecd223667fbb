"""Byte-exact passthrough of every request answerbox does not handle itself.

A raw aiohttp session rather than opensearch-py: the client must not parse or re-encode
bodies, so `_cat` text, NDJSON `_bulk` and compressed bodies come back exactly as
OpenSearch sent them, streamed in both directions over one pooled connection set.
aiohttp rather than httpx: it costs about half as much per request (measured with
bench/proxy_overhead.py), and it is already here as opensearch-py's async transport.
"""

from __future__ import annotations

import io
import ssl
from collections.abc import AsyncIterator, Iterable

import aiohttp
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from yarl import URL

from answerbox.core.config import OpenSearchSettings
from answerbox.core.errors import InvalidRequest, UpstreamTimeout, UpstreamUnavailable

__all__ = ["Passthrough"]

# RFC 9110 §7.6.1 connection-specific headers; never forwarded by a proxy. Bytes, lower case: the
# ASGI server gives header names so, and matching them undecoded costs every request less.
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


# Responses up to this size are buffered; larger or unsized ones stream.
_BUFFER_BYTES = 256 * 1024
# Request bodies up to this size are sent as bytes, larger ones from a file-like object.
_INLINE_SEND_BYTES = 256 * 1024


async def _release(response: aiohttp.ClientResponse) -> None:
    # An async callable: Starlette would run a plain function in its thread pool.
    response.release()


# What a proxy in front of OpenSearch says about the caller: OpenSearch's proxy authentication
# believes these from a trusted proxy's address, which answerbox's may be; a caller's own would
# then be an identity of its choosing.
_PROXY_IDENTITY = (b"x-proxy-user", b"x-proxy-roles", b"x-forwarded-")


def _forwardable(raw: Iterable[tuple[bytes, bytes]]) -> list[tuple[str, str]]:
    """The caller's headers (the ASGI scope's: names in lower case) less the hop-by-hop ones (those
    RFC 9110 names and those its ``Connection`` header names) and any claim to a proxy-given identity."""
    pairs = list(raw)
    named = {token.strip().lower() for k, v in pairs if k == b"connection" for token in v.split(b",")}
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in pairs if not _dropped(k, named)]


def _dropped(name: bytes, named: set[bytes]) -> bool:
    return name in _HOP_BY_HOP or name in named or name.startswith(_PROXY_IDENTITY)


def _ssl(settings: OpenSearchSettings) -> ssl.SSLContext | bool:
    if settings.ca_certs:
        return ssl.create_default_context(cafile=str(settings.ca_certs))
    return settings.verify_certs


class Passthrough:
    """Forwards a Starlette request to OpenSearch and streams the answer back unchanged."""

    def __init__(self, settings: OpenSearchSettings) -> None:
        # Scheme, authority and nothing more: the caller's raw path and query go after it.
        self._origin = str(URL(settings.url).with_path("", encoded=True))
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=settings.max_connections, ssl=_ssl(settings)),
            timeout=aiohttp.ClientTimeout(
                total=None, connect=settings.connect_timeout_s, sock_read=settings.request_timeout_s
            ),
            auto_decompress=False,
            # One session serves every caller: a cookie one caller's answer set must never
            # ride along on another caller's request.
            cookie_jar=aiohttp.DummyCookieJar(),
            # Send the caller's headers only: no User-Agent, Accept-Encoding or Content-Type of our own.
            skip_auto_headers=("User-Agent", "Accept-Encoding", "Accept", "Content-Type"),
        )

    async def forward(self, request: Request, body: bytes | None = None) -> Response:
        """Send ``request`` upstream; ``body`` replaces the request stream when already read."""
        content: bytes | io.BytesIO | AsyncIterator[bytes] = request.stream() if body is None else body
        if body is not None and len(body) > _INLINE_SEND_BYTES:
            # A file-like body: aiohttp sends raw bytes of over a megabyte from the event loop in
            # one piece (and warns that it may block).
            content = io.BytesIO(body)
        # Path and query string go on as the caller wrote them (still percent-encoded), not
        # decoded and re-encoded: a %00 stays three characters.
        scope = request.scope
        target = self._origin + (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
        query = scope["query_string"].decode("latin-1")
        url = URL(f"{target}?{query}" if query else target, encoded=True)
        try:
            upstream = await self._session.request(
                request.method, url, data=content, headers=_forwardable(scope["headers"]), allow_redirects=False
            )
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise UpstreamTimeout.after(exc) from exc
        except aiohttp.ClientError as exc:
            raise UpstreamUnavailable.unreachable(exc) from exc
        except ValueError as exc:  # aiohttp refuses to send a request line or header with control characters
            raise InvalidRequest(f"the request cannot be forwarded: {exc}") from exc
        response: Response
        if upstream.content_length is not None and upstream.content_length <= _BUFFER_BYTES:
            # Small bodies are read whole: streaming costs a task group per response.
            async with upstream:
                response = Response(await upstream.read(), status_code=upstream.status)
        else:
            response = StreamingResponse(
                upstream.content.iter_any(), status_code=upstream.status, background=BackgroundTask(_release, upstream)
            )
        # A list, not a dict: repeated headers (Set-Cookie, Warning) must all come back.
        response.raw_headers = [(k, v) for k, v in upstream.raw_headers if k.lower() not in _HOP_BY_HOP]
        return response

    async def aclose(self) -> None:
        await self._session.close()
