"""The answer box page and its embeddable ``<answer-box>`` element, served at ``/_answerbox/ui/``.

Plain HTML, CSS and JavaScript modules: no front-end build, so what is in ``static/`` is
what a browser runs.
"""

from __future__ import annotations

from pathlib import Path

from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["SECURITY_HEADERS", "STATIC_DIR", "UI_PATH", "ui_routes"]

UI_PATH = "/_answerbox/ui"
STATIC_DIR = Path(__file__).parent / "static"
# The page runs only its own modules and talks only to answerbox; no other site may frame
# it (clickjacking a signed-in admin) and no response is sniffed into another type.
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "base-uri 'none'; form-action 'self'; frame-ancestors 'self'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "SAMEORIGIN",
    "referrer-policy": "same-origin",
}


class _WithSecurityHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).update(SECURITY_HEADERS)
            await send(message)

        try:
            await self._app(scope, receive, send_with_headers)
        except HTTPException as exc:
            # StaticFiles raises its 404: answered here, it carries the headers too.
            await PlainTextResponse(exc.detail, status_code=exc.status_code)(scope, receive, send_with_headers)


async def _to_directory(request: Request) -> Response:
    # The page's relative links resolve against the trailing slash; a relative Location
    # keeps working behind a reverse proxy that mounts answerbox under a path prefix.
    query = f"?{request.url.query}" if request.url.query else ""
    return RedirectResponse(f"ui/{query}", status_code=308)


def ui_routes() -> list[BaseRoute]:
    """Routes to place before the passthrough catch-all, which would send these paths to OpenSearch."""
    return [
        Route(UI_PATH, _to_directory, methods=["GET", "HEAD"]),
        Mount(UI_PATH, app=_WithSecurityHeaders(StaticFiles(directory=STATIC_DIR, html=True)), name="ui"),
    ]
