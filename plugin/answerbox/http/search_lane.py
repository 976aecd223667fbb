"""The lane for plain searches: a search no pipeline can apply to goes on to OpenSearch without
passing through Starlette's exception middleware, router and endpoint wrappers.

Those searches are most of a cluster's traffic, and those layers cost a plain search more than
answerbox's own checks do. This ASGI middleware sits inside Starlette's outermost one (which
still answers any unexpected error with a 500) and makes the same checks as the ``_search``
route, through the same ``SearchHandler``: the body read within the limits, then whether the
body, the parameters or the index's default name a pipeline. A search that may run one goes
on to that route with its body replayed; so does every other request, untouched.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from answerbox.core.errors import AnswerboxError
from answerbox.http.search import SearchHandler

__all__ = ["SearchLane"]

_SEARCH = "/_search"
_METHODS = frozenset({"GET", "POST"})  # the `_search` routes' (their HEAD goes the routes' way)


class SearchLane:
    """Plain searches straight to the passthrough; everything else on to ``app``."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        handler_of: Callable[[Scope], SearchHandler],
        on_error: Callable[[Request, Exception], Awaitable[Response]],
    ) -> None:
        self._app = app
        self._handler_of = handler_of
        self._on_error = on_error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        index = _search_index(scope)
        if index is None:
            await self._app(scope, receive, send)
            return
        request = Request(scope, receive)
        try:
            plain = await self._handler_of(scope).forward_plain(request, index or None)
        except AnswerboxError as exc:
            plain = await self._on_error(request, exc)
        if isinstance(plain, bytes):  # a pipeline may apply: the route runs it on the body read here
            await self._app(scope, _replay(plain, receive), send)
        else:
            await plain(scope, receive, send)


def _search_index(scope: Scope) -> str | None:
    """The index a ``_search`` request names, as the routes ``/_search`` (``""``) and
    ``/{index}/_search`` (one path segment) match it; None for any other request."""
    if scope["type"] != "http" or scope["method"] not in _METHODS or scope.get("root_path"):
        return None
    path: str = scope["path"]
    if path == _SEARCH:
        return ""
    index = path[1 : -len(_SEARCH)]
    if path.startswith("/") and path.endswith(_SEARCH) and index and "/" not in index:
        return index
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` with the body already read given first, whole."""
    given = False

    async def replayed() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed
