"""The ASGI app: answerbox's own routes, the search interception, and the passthrough for the rest.

Starlette + uvicorn: a thin ASGI toolkit with streaming request and response bodies,
which a byte-exact proxy needs, and nothing it would have to work around.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from opensearchpy import AsyncConnection
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Scope

from answerbox.core.config import Settings
from answerbox.core.errors import AnswerboxError, error_body
from answerbox.doctor import Doctor
from answerbox.http.lanes import FastLanes, RouteShapes
from answerbox.http.memory import MemoryAPI
from answerbox.http.monitoring import Monitoring
from answerbox.http.opaque_id import EchoOpaqueId
from answerbox.http.passthrough import Passthrough
from answerbox.http.pipelines import PipelineAPI
from answerbox.http.rendering import OpenSearchJSON
from answerbox.http.search import SearchHandler
from answerbox.http.stream import AnswerStream
from answerbox.memory import Memory
from answerbox.opensearch import OpenSearchClients
from answerbox.pipeline.catalogue.cluster_pipelines import ClusterPipelines
from answerbox.pipeline.catalogue.registry import ProcessorRegistry
from answerbox.pipeline.catalogue.resolver import PipelineResolver
from answerbox.pipeline.catalogue.store import PipelineStore
from answerbox.pipeline.catalogue.warm_up import WarmUp
from answerbox.pipeline.run.engine import SearchEngine
from answerbox.pipeline.run.stats import PipelineStats
from answerbox.processors.registry import default_registry
from answerbox.services import Services
from answerbox.ui import ui_routes

if TYPE_CHECKING:
    import httpx2  # openai's HTTP client

__all__ = ["Transports", "create_app"]

logger = logging.getLogger(__name__)

_ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]


@dataclass(frozen=True, kw_only=True)
class Transports:
    """What carries answerbox's requests to OpenSearch (its clients; the passthrough always goes
    over the network) and to the LLM. None: the network, as configured; a test gives in-process ones."""

    opensearch: type[AsyncConnection] | None = None
    llm: httpx2.AsyncBaseTransport | None = None


@dataclass
class _State:
    monitoring: Monitoring
    passthrough: Passthrough
    clients: OpenSearchClients
    services: Services
    search: SearchHandler
    stream: AnswerStream
    pipelines: PipelineAPI
    memory: MemoryAPI
    warm_up: WarmUp


def _build_state(settings: Settings, registry: ProcessorRegistry, transports: Transports) -> _State:
    clients = OpenSearchClients(settings.opensearch, connection_class=transports.opensearch)
    passthrough = Passthrough(settings.opensearch, settings.limits)
    services = Services.create(settings, clients.service, llm_transport=transports.llm)
    stats = PipelineStats()
    store = PipelineStore(
        service=clients.service,
        caller=clients.caller,
        index=settings.opensearch.pipeline_index,
        cache_s=settings.opensearch.default_pipeline_cache_s,
    )
    resolver = PipelineResolver(
        store=store,
        registry=registry,
        services=services,
        stats=stats,
        settings_client=clients.service,
        cache_s=settings.opensearch.default_pipeline_cache_s,
    )
    memory = Memory(settings.memory, clients)
    engine = SearchEngine(resolver=resolver, backend=clients.search, memory=memory, settings=settings)
    warm_up = WarmUp(store=store, resolver=resolver, llm=services.llm)
    doctor = Doctor(settings, clients, services, resolver.build, warm_up=warm_up)
    return _State(
        monitoring=Monitoring(doctor=doctor, stats=stats, client=clients.caller),
        passthrough=passthrough,
        clients=clients,
        services=services,
        search=SearchHandler(engine=engine, passthrough=passthrough, settings=settings),
        stream=AnswerStream(engine=engine, settings=settings),
        pipelines=PipelineAPI(
            store=store, cluster=ClusterPipelines(clients.caller), resolver=resolver, limits=settings.limits
        ),
        memory=MemoryAPI(memory=memory, passthrough=passthrough, limits=settings.limits),
        warm_up=warm_up,
    )


async def _answerbox_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, AnswerboxError)
    return OpenSearchJSON(exc.to_body(), status_code=exc.status)


async def _unexpected_error(request: Request, exc: Exception) -> Response:
    logger.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    # The exception's text may name files, hosts or settings: it stays in the log.
    return OpenSearchJSON(
        error_body(500, "exception", "internal error in answerbox (its log has the details)"), status_code=500
    )


class AppState(TypedDict):
    """What the lifespan gives every request (``request.state``): the app's one set of parts."""

    answerbox: _State


def _parts(request: Request) -> _State:
    return _scope_parts(request.scope)


def _scope_parts(scope: Scope) -> _State:
    # The scope's state itself: ``request.state`` wraps it in a new object every request.
    parts: _State = scope["state"]["answerbox"]
    return parts


async def _search(request: Request) -> Response:
    return await _parts(request).search.answer(request, request.path_params.get("index"))


async def _msearch(request: Request) -> Response:
    return await _parts(request).search.msearch(request, request.path_params.get("index"))


def _route(path: str, action: Callable[[_State, Request], Awaitable[Response]], methods: list[str]) -> Route:
    """A route whose endpoint is ``action`` on the app's parts."""

    async def endpoint(request: Request) -> Response:
        return await action(_parts(request), request)

    return Route(path, endpoint, methods=methods)


def _memory_route(path: str, action: Callable[[MemoryAPI, Request], Awaitable[Response]], methods: list[str]) -> Route:
    return _route(path, lambda parts, request: action(parts.memory, request), methods)


_MEMORY = "/_plugins/_ml/memory"
_MEMORY_ROUTES = [
    _memory_route(_MEMORY, MemoryAPI.create, ["POST"]),
    _memory_route(f"{_MEMORY}/", MemoryAPI.create, ["POST"]),
    _memory_route(_MEMORY, MemoryAPI.memories, ["GET"]),
    _memory_route(f"{_MEMORY}/_search", MemoryAPI.search, ["GET", "POST"]),
    _memory_route(f"{_MEMORY}/message/{{message_id}}", MemoryAPI.message, ["GET"]),
    _memory_route(f"{_MEMORY}/message/{{message_id}}", MemoryAPI.update_message, ["PUT"]),
    _memory_route(f"{_MEMORY}/message/{{message_id}}/traces", MemoryAPI.traces, ["GET"]),
    _memory_route(f"{_MEMORY}/{{memory_id}}/messages", MemoryAPI.add_message, ["POST"]),
    _memory_route(f"{_MEMORY}/{{memory_id}}/messages", MemoryAPI.messages, ["GET"]),
    _memory_route(f"{_MEMORY}/{{memory_id}}/_search", MemoryAPI.search, ["GET", "POST"]),
    _memory_route(f"{_MEMORY}/{{memory_id}}", MemoryAPI.get, ["GET"]),
    _memory_route(f"{_MEMORY}/{{memory_id}}", MemoryAPI.update, ["PUT"]),
    _memory_route(f"{_MEMORY}/{{memory_id}}", MemoryAPI.delete, ["DELETE"]),
]


async def _passthrough(request: Request) -> Response:
    return await _parts(request).passthrough.forward(request)


_ROUTES = [
    # Searches first: most of a cluster's traffic, and the router tries routes in order. No
    # route below matches what these do (``{index}`` is one path segment).
    Route("/{index}/_search", _search, methods=["GET", "POST"]),
    Route("/_search", _search, methods=["GET", "POST"]),
    _route("/_search/pipeline", lambda parts, request: parts.pipelines.get(request), ["GET"]),
    _route("/_search/pipeline/{id}", lambda parts, request: parts.pipelines.get(request), ["GET"]),
    _route("/_search/pipeline/{id}", lambda parts, request: parts.pipelines.put(request), ["PUT"]),
    _route("/_search/pipeline/{id}", lambda parts, request: parts.pipelines.delete(request), ["DELETE"]),
    Route("/_msearch", _msearch, methods=["GET", "POST"]),
    Route("/{index}/_msearch", _msearch, methods=["GET", "POST"]),
    _route("/{index}/_answerbox/stream", lambda parts, request: parts.stream.stream(request), ["POST"]),
    _route("/_answerbox/stats/search_pipeline", lambda parts, request: parts.monitoring.stats(request), ["GET"]),
    _route("/_answerbox/health", lambda parts, request: parts.monitoring.health(request), ["GET"]),
    _route("/metrics", lambda parts, request: parts.monitoring.metrics(request), ["GET"]),
    *_MEMORY_ROUTES,
    *ui_routes(),
    # Last: everything answerbox does not handle goes to OpenSearch as it came.
    Route("/{path:path}", _passthrough, methods=_ALL_METHODS),
]
# Checked here, at import: a route the lanes could not tell from the passthrough's stops the start.
_SHAPES = RouteShapes.of(_ROUTES)


def create_app(
    settings: Settings, registry: ProcessorRegistry | None = None, *, transports: Transports | None = None
) -> Starlette:
    registry = registry or default_registry()
    transports = transports or Transports()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[AppState]:
        # Built here, not in create_app: the clients' connection pools belong to the server's loop.
        parts = _build_state(settings, registry, transports)
        # In the background: the passthrough serves at once; readiness waits for it.
        parts.warm_up.start()
        try:
            yield {"answerbox": parts}
        finally:
            await parts.warm_up.aclose()
            await parts.services.aclose()
            await parts.clients.aclose()
            await parts.passthrough.aclose()

    return Starlette(
        routes=_ROUTES,
        # Inside Starlette's outermost middleware, which answers any unexpected error with a 500.
        # The caller's X-Opaque-Id goes on every answer the lanes or the routes write; the lanes
        # take searches and the passthrough's own requests past the router.
        middleware=[
            Middleware(EchoOpaqueId),
            Middleware(
                FastLanes,
                shapes=_SHAPES,
                search_of=lambda scope: _scope_parts(scope).search,
                passthrough_of=lambda scope: _scope_parts(scope).passthrough,
                on_error=_answerbox_error,
            ),
        ],
        lifespan=lifespan,
        exception_handlers={AnswerboxError: _answerbox_error, Exception: _unexpected_error},
    )
