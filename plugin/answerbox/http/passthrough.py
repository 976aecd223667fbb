"""Byte-exact passthrough of every request answerbox does not handle itself.

httpx rather than opensearch-py here: the client must not parse or re-encode bodies,
so `_cat` text, NDJSON `_bulk` and compressed bodies come back exactly as OpenSearch sent
them, streamed in both directions over one pooled connection set.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

import httpx
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from answerbox.config import OpenSearchSettings
from answerbox.errors import UpstreamUnavailable

__all__ = ["Passthrough", "forwardable_headers"]

# RFC 9110 §7.6.1 connection-specific headers; never forwarded by a proxy.
_HOP_BY_HOP = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade", "host"}
)


def forwardable_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers if k.lower() not in _HOP_BY_HOP]


class Passthrough:
    """Forwards a Starlette request to OpenSearch and streams the answer back unchanged."""

    def __init__(self, settings: OpenSearchSettings) -> None:
        verify: bool | str = str(settings.ca_certs) if settings.ca_certs else settings.verify_certs
        self._client = httpx.AsyncClient(
            base_url=settings.url,
            verify=verify,
            timeout=httpx.Timeout(settings.request_timeout_s, connect=settings.connect_timeout_s),
            limits=httpx.Limits(max_connections=settings.max_connections),
            follow_redirects=False,
        )

    async def forward(self, request: Request, body: bytes | None = None) -> Response:
        """Send ``request`` upstream; ``body`` replaces the request stream when already read."""
        content: bytes | AsyncIterator[bytes] = body if body is not None else request.stream()
        upstream_request = self._client.build_request(
            request.method,
            httpx.URL(path=request.url.path, query=request.url.query.encode()),
            headers=forwardable_headers(request.headers.items()),
            content=content,
        )
        try:
            upstream = await self._client.send(upstream_request, stream=True)
        except httpx.TimeoutException as exc:
            raise UpstreamUnavailable(f"OpenSearch did not answer in time: {exc}", status=504, error_type="timeout_exception") from exc
        except httpx.TransportError as exc:
            raise UpstreamUnavailable(f"OpenSearch is unreachable: {exc}") from exc
        response = StreamingResponse(
            upstream.aiter_raw(), status_code=upstream.status_code, background=BackgroundTask(upstream.aclose)
        )
        # A list, not a dict: repeated headers (Set-Cookie, Warning) must all come back.
        response.raw_headers = [
            (k.encode("latin-1"), v.encode("latin-1")) for k, v in forwardable_headers(upstream.headers.multi_items())
        ]
        return response

    async def aclose(self) -> None:
        await self._client.aclose()
