"""The ASGI app: answerbox's own routes, the search interception, and the passthrough for the rest.

Starlette + uvicorn: a thin ASGI toolkit with streaming request and response bodies,
which a byte-exact proxy needs, and nothing it would have to work around.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from answerbox.config import Settings
from answerbox.errors import AnswerboxError, error_body
from answerbox.http.passthrough import Passthrough
from answerbox.http.pipelines import PipelineAPI
from answerbox.http.search import SearchHandler
from answerbox.http.stream import AnswerStream
from answerbox.llm import LLMClient
from answerbox.opensearch import OpenSearchClients
from answerbox.pipeline.registry import ProcessorRegistry
from answerbox.pipeline.resolver import PipelineResolver
from answerbox.pipeline.run import SearchEngine
from answerbox.pipeline.stats import PipelineStats
from answerbox.pipeline.store import PipelineStore
from answerbox.processors import default_registry
from answerbox.prompts import PromptLibrary
from answerbox.services import Services
from answerbox.shared_cache import SharedCache
from answerbox.ui import ui_routes

__all__ = ["create_app"]

logger = logging.getLogger(__name__)

Endpoint = Callable[[Request], Awaitable[Response]]
_ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]


@dataclass
class _State:
    passthrough: Passthrough
    clients: OpenSearchClients
    services: Services
    stats: PipelineStats
    search: SearchHandler
    stream: AnswerStream
    pipelines: PipelineAPI


def _build_state(settings: Settings, registry: ProcessorRegistry) -> _State:
    clients = OpenSearchClients(settings.opensearch)
    passthrough = Passthrough(settings.opensearch)
    prompts = PromptLibrary(settings.templates_dir)
    services = Services(
        settings,
        LLMClient(settings.llm, prompts),
        prompts,
        SharedCache(clients.service, settings.opensearch.cache_index),
    )
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
    engine = SearchEngine(resolver=resolver, backend=clients.search, settings=settings)
    return _State(
        passthrough=passthrough,
        clients=clients,
        services=services,
        stats=stats,
        search=SearchHandler(engine=engine, passthrough=passthrough, settings=settings),
        stream=AnswerStream(engine=engine, settings=settings),
        pipelines=PipelineAPI(store=store, resolver=resolver, limits=settings.limits),
    )


async def _answerbox_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, AnswerboxError)
    return JSONResponse(exc.to_body(), status_code=exc.status)


async def _unexpected_error(request: Request, exc: Exception) -> Response:
    logger.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    # The exception's text may name files, hosts or settings: it stays in the log.
    return JSONResponse(error_body(500, "exception", "internal error in answerbox (its log has the details)"), status_code=500)


def create_app(settings: Settings, registry: ProcessorRegistry | None = None) -> Starlette:
    registry = registry or default_registry()
    holder: dict[str, _State] = {}

    def state() -> _State:
        return holder["state"]

    def route(path: str, handler: Callable[[_State], Endpoint], methods: list[str]) -> Route:
        async def endpoint(request: Request) -> Response:
            return await handler(state())(request)

        return Route(path, endpoint, methods=methods)

    async def stats(request: Request) -> Response:
        return JSONResponse(state().stats.snapshot())

    async def metrics(request: Request) -> Response:
        return Response(generate_latest(state().stats.registry), media_type=CONTENT_TYPE_LATEST)

    async def passthrough(request: Request) -> Response:
        return await state().passthrough.forward(request)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        holder["state"] = _build_state(settings, registry)
        try:
            yield
        finally:
            current = holder.pop("state")
            await current.services.aclose()
            await current.clients.aclose()
            await current.passthrough.aclose()

    routes = [
        route("/_search/pipeline", lambda s: s.pipelines.get, ["GET"]),
        route("/_search/pipeline/{id}", lambda s: s.pipelines.get, ["GET"]),
        route("/_search/pipeline/{id}", lambda s: s.pipelines.put, ["PUT"]),
        route("/_search/pipeline/{id}", lambda s: s.pipelines.delete, ["DELETE"]),
        route("/_search", lambda s: s.search.search, ["GET", "POST"]),
        route("/{index}/_search", lambda s: s.search.search, ["GET", "POST"]),
        route("/_msearch", lambda s: s.search.msearch, ["GET", "POST"]),
        route("/{index}/_msearch", lambda s: s.search.msearch, ["GET", "POST"]),
        route("/{index}/_answerbox/stream", lambda s: s.stream.stream, ["POST"]),
        Route("/_answerbox/stats/search_pipeline", stats, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        *ui_routes(),
        Route("/{path:path}", passthrough, methods=_ALL_METHODS),
    ]
    return Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={AnswerboxError: _answerbox_error, Exception: _unexpected_error},
    )
