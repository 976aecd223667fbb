"""The caller's ``X-Opaque-Id`` on every answer, as OpenSearch echoes it.

OpenSearch copies the header onto each response, so a client can pair an answer with its request
and find the request in the tasks API and the slow logs (answerbox's own searches carry it on,
``opensearch.Caller``). A passthrough answer from OpenSearch holds it already; answerbox's own
answers (a pipeline's, its errors, its APIs) get it here.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["EchoOpaqueId"]

_NAME = b"x-opaque-id"
_WRITTEN = b"X-Opaque-Id"  # OpenSearch's spelling


class EchoOpaqueId:
    """Adds the request's ``X-Opaque-Id`` to a response that lacks it; a request without one
    passes untouched."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        value = _opaque_id(scope["headers"]) if scope["type"] == "http" else None
        if value is None:
            await self._app(scope, receive, send)
            return

        async def echoing(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                if not any(name.lower() == _NAME for name, _ in headers):
                    message = {**message, "headers": [*headers, (_WRITTEN, value)]}
            await send(message)

        await self._app(scope, receive, echoing)


def _opaque_id(headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    # ASGI servers give the request's header names lowercased.
    return next((value for name, value in headers if name == _NAME), None)
