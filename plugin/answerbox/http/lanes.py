"""Two lanes past Starlette's exception middleware, router and endpoint wrappers, for the
commonest requests: most of a cluster's traffic runs no answerbox pipeline, and for it those
layers cost more than answerbox's own checks do.

- **Searches.** A request the ``_search`` or ``_msearch`` routes would take is answered by
  ``SearchHandler.answer`` or ``SearchHandler.msearch``, as those routes answer it: the body read
  within the limits, sent on unparsed when neither its body, its parameters nor its index name a
  pipeline (for an ``_msearch``, none of its header lines), its pipelines run otherwise.
- **The passthrough's own.** A request whose path holds none of the literal segments of
  answerbox's routes (``_search``, ``_answerbox``, ``_plugins``, ...) can only be the catch-all
  route's, and is forwarded as that route does.

The middleware sits inside Starlette's outermost one, which still answers an unexpected error
with a 500; answerbox's own errors are answered here, in OpenSearch's shape. Every other
request goes on to the routes, untouched.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from answerbox.core.errors import AnswerboxError
from answerbox.http.passthrough import Passthrough
from answerbox.http.search import SearchHandler

__all__ = ["FastLanes", "RouteShapes"]

_SEARCH = "/_search"
_MSEARCH = "/_msearch"
# The `_search` and `_msearch` routes' methods (their HEAD goes the routes' way).
_SEARCH_METHODS = frozenset({"GET", "POST"})


@dataclass(frozen=True)
class RouteShapes:
    """What the lanes need of the app's routes: the literal path segments of answerbox's own, and
    the methods of the passthrough's catch-all (the last route)."""

    own_segments: frozenset[str]
    passthrough_methods: frozenset[str]

    @classmethod
    def of(cls, routes: Sequence[BaseRoute]) -> RouteShapes:
        """Each route before the catch-all must have a literal segment: a path that holds none of
        them is taken as the catch-all's."""
        *own, catch_all = routes
        if not isinstance(catch_all, Route) or catch_all.methods is None or _literal_segments(catch_all):
            raise ValueError("the last route must be the passthrough's catch-all")
        segments = frozenset(segment for route in own for segment in _literal_segments(route, required=True))
        return cls(own_segments=segments, passthrough_methods=frozenset(catch_all.methods))


class FastLanes:
    """Searches and the passthrough's own requests, past the router; the rest on to ``app``."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        shapes: RouteShapes,
        search_of: Callable[[Scope], SearchHandler],
        passthrough_of: Callable[[Scope], Passthrough],
        on_error: Callable[[Request, Exception], Awaitable[Response]],
    ) -> None:
        self._app = app
        self._shapes = shapes
        self._search_of = search_of
        self._passthrough_of = passthrough_of
        self._on_error = on_error

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # A mounted app's paths are the router's to strip: the lanes take none of its requests.
        if scope["type"] != "http" or scope.get("root_path"):
            await self._app(scope, receive, send)
            return
        search = _search_target(scope)
        if search is None and not self._passthroughs_own(scope):
            await self._app(scope, receive, send)
            return
        request = Request(scope, receive)
        try:
            if search is None:
                response = await self._passthrough_of(scope).forward(request)
            elif search[0] == _SEARCH:
                response = await self._search_of(scope).answer(request, search[1] or None)
            else:
                response = await self._search_of(scope).msearch(request, search[1] or None)
        except AnswerboxError as exc:
            response = await self._on_error(request, exc)
        await response(scope, receive, send)

    def _passthroughs_own(self, scope: Scope) -> bool:
        """Whether only the catch-all route can take the request: its method is one the route
        takes, and its path holds no literal segment of another route."""
        shapes = self._shapes
        return scope["method"] in shapes.passthrough_methods and shapes.own_segments.isdisjoint(
            scope["path"].split("/")
        )


def _literal_segments(route: BaseRoute, *, required: bool = False) -> set[str]:
    """The segments of ``route``'s path that are literal, not parameters."""
    if not isinstance(route, Route | Mount):
        raise ValueError(f"the lanes know no route of type {type(route).__name__}")
    segments = {segment for segment in route.path.split("/") if segment}
    if any("{" in segment and not segment.startswith("{") for segment in segments):
        raise ValueError(f"route {route.path!r} has a segment that is part literal")
    literal = {segment for segment in segments if "{" not in segment}
    if required and not literal:
        raise ValueError(f"route {route.path!r} has no literal segment: the lanes cannot tell its paths apart")
    return literal


def _search_target(scope: Scope) -> tuple[str, str] | None:
    """The endpoint (``_SEARCH``, ``_MSEARCH``) and the index a request names, as the routes
    ``/_search`` (index ``""``) and ``/{index}/_search`` (one path segment), and their
    ``_msearch`` twins, match it; None for any other request."""
    if scope["method"] not in _SEARCH_METHODS:
        return None
    path: str = scope["path"]
    for endpoint in (_SEARCH, _MSEARCH):
        if path.endswith(endpoint):
            index = path[1 : -len(endpoint)]
            if path == endpoint or (path.startswith("/") and index and "/" not in index):
                return endpoint, index
            return None
    return None
