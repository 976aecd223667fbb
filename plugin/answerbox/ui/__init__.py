"""The answer box page and its embeddable ``<answer-box>`` element, served at ``/_answerbox/ui/``.

Plain HTML, CSS and JavaScript modules: no front-end build, so what is in ``static/`` is
what a browser runs.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

__all__ = ["STATIC_DIR", "UI_PATH", "ui_routes"]

UI_PATH = "/_answerbox/ui"
STATIC_DIR = Path(__file__).parent / "static"


async def _to_directory(request: Request) -> Response:
    # The page's relative links resolve against the trailing slash; a relative Location
    # keeps working behind a reverse proxy that mounts answerbox under a path prefix.
    query = f"?{request.url.query}" if request.url.query else ""
    return RedirectResponse(f"ui/{query}", status_code=308)


def ui_routes() -> list[BaseRoute]:
    """Routes to place before the passthrough catch-all, which would send these paths to OpenSearch."""
    return [
        Route(UI_PATH, _to_directory, methods=["GET", "HEAD"]),
        Mount(UI_PATH, app=StaticFiles(directory=STATIC_DIR, html=True), name="ui"),
    ]
