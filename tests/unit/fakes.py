"""Stand-ins for what the unit layer never reaches: OpenSearch, seen through the one seam
processors search by (``SearchBackend``), and time, on a clock that moves only when told
(``FakeClock``; ``run_on`` moves asyncio's with it)."""

from __future__ import annotations

import asyncio
import fnmatch
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from answerbox.core.config import Limits
from answerbox.core.errors import ConfigError
from answerbox.opensearch import JSON, Caller, SearchBackend
from answerbox.pipeline.base import PipelineContext, Processor, RequestProcessor, ResponseProcessor, SearchRequest
from answerbox.pipeline.caller_scope.scope import ScopedSearch, SearchScope
from answerbox.pipeline.catalogue.definition import PipelineDefinition
from answerbox.pipeline.run.deadline import Deadline
from answerbox.pipeline.run.hits_asked import HitsAsked
from answerbox.pipeline.run.pipeline import Pipeline
from answerbox.pipeline.run.plan import plan_of
from answerbox.pipeline.run.stats import PipelineStats
from answerbox.processors.registry import default_registry
from answerbox.services import Services

T = TypeVar("T")


@dataclass(frozen=True)
class BackendCall:
    method: str  # "search" | "msearch"
    index: str | None
    body: Any  # search: the body; msearch: the (header, body) pairs
    params: dict[str, str]
    caller: Caller
    pipeline: JSON | None


@dataclass(frozen=True)
class AliasLookup:
    index: str
    params: dict[str, str]
    caller: Caller


class RecordingBackend(SearchBackend):
    """Records every search and answers each with no hits; records every alias lookup and
    answers it from ``alias_answers`` by target (an exception: raised, as OpenSearch may
    refuse), a target not there as an index of that name without aliases."""

    def __init__(self) -> None:  # no client: nothing is sent anywhere
        self.calls: list[BackendCall] = []
        self.alias_lookups: list[AliasLookup] = []
        self.alias_answers: dict[str, JSON | Exception] = {}

    async def aliases(self, *, index: str, params: Mapping[str, str], caller: Caller) -> JSON:
        self.alias_lookups.append(AliasLookup(index, dict(params), caller))
        answer = self.alias_answers.get(index, {index: {"aliases": {}}})
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def search(
        self, *, index: str | None, body: JSON, params: Mapping[str, str], caller: Caller, pipeline: JSON | None = None
    ) -> JSON:
        self.calls.append(BackendCall("search", index, body, dict(params), caller, pipeline))
        return {"hits": {"total": {"value": 0, "relation": "eq"}, "hits": []}}

    async def msearch(
        self,
        *,
        searches: Sequence[tuple[JSON, JSON]],
        params: Mapping[str, str],
        caller: Caller,
        pipeline: JSON | None = None,
        inline: bool = True,
    ) -> JSON:
        self.calls.append(BackendCall("msearch", None, list(searches), dict(params), caller, pipeline))
        return {"responses": [{"hits": {"hits": []}} for _ in searches]}


def scoped_search(
    backend: SearchBackend | None = None, *, index: str | None = "docs", body: JSON | None = None
) -> ScopedSearch:
    scope = SearchScope.of(caller=Caller(), index=index, body=body or {}, params={}, native=None, unscopable=None)
    return ScopedSearch(backend or RecordingBackend(), scope)


class FakeClock:
    """A clock that moves only when told: shares of time come out exact."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def pipeline_context(clock: FakeClock | None = None, **overrides: Any) -> PipelineContext:
    """A run's context searching through a ``RecordingBackend``, its time on ``clock`` (a new
    fake one by default)."""
    overrides.setdefault("search", scoped_search())
    overrides.setdefault("deadline", Deadline(clock or FakeClock()))
    return PipelineContext(
        pipeline_id=overrides.pop("pipeline_id", "test"), question=overrides.pop("question", None), **overrides
    )


async def _planned(processor: Processor[Any], request: SearchRequest, ctx: PipelineContext) -> bool:
    """``processor``'s plan resolved as the engine resolves it when a search opens (``pipeline/run/plan.py``),
    with no step after it; False, and the warning a run gives, when the search makes it pointless."""
    request_steps = [processor] if isinstance(processor, RequestProcessor) else []
    response_steps = [processor] if isinstance(processor, ResponseProcessor) else []
    pipeline = Pipeline(
        id=ctx.pipeline_id,
        request_processors=request_steps,
        response_processors=response_steps,
        native=None,
        stats=PipelineStats(),
        timeout_s=30.0,
        budget_s=30.0,
    )
    ctx.plans |= (
        await plan_of(pipeline, ctx.generative_qa, Limits(), HitsAsked.of(request.body, request.params))
    ).plans
    skipped = ctx.plans[processor].skipped
    if skipped:
        processor.warn(ctx, skipped)
    return not skipped


async def responded(
    processor: ResponseProcessor[Any], request: SearchRequest, response: JSON, ctx: PipelineContext
) -> JSON:
    """``processor``'s response as a run gets it: its plan resolved first (``_planned``)."""
    return (
        await processor.process_response(request, response, ctx)
        if await _planned(processor, request, ctx)
        else response
    )


async def requested(processor: RequestProcessor[Any], request: SearchRequest, ctx: PipelineContext) -> SearchRequest:
    """``processor``'s request as a run gets it (``responded``'s twin for request processors)."""
    return await processor.process_request(request, ctx) if await _planned(processor, request, ctx) else request


def response_of(hits: Sequence[JSON]) -> JSON:
    """A search response holding ``hits``, as OpenSearch shapes it."""
    scores = [h["_score"] for h in hits if isinstance(h.get("_score"), int | float)]
    return {
        "took": 1,
        "timed_out": False,
        "hits": {
            "total": {"value": len(hits), "relation": "eq"},
            "max_score": max(scores) if scores else None,
            "hits": [dict(h) for h in hits],
        },
    }


def _source_filtered(hit: JSON, spec: Any) -> JSON:
    """``hit`` with its ``_source`` filtered as a body's ``_source`` asks (top-level fields, wildcards)."""
    if spec is True or "_source" not in hit:
        return dict(hit)
    if spec is False:
        return {k: v for k, v in hit.items() if k != "_source"}
    includes = [spec] if isinstance(spec, str) else list(spec) if isinstance(spec, list) else spec.get("includes")
    excludes = spec.get("excludes", []) if isinstance(spec, dict) else []
    source = {
        name: value
        for name, value in hit["_source"].items()
        if (not includes or any(fnmatch.fnmatchcase(name, p) for p in includes))
        and not any(fnmatch.fnmatchcase(name, p) for p in excludes)
    }
    return {**hit, "_source": source}


class ScriptedBackend(RecordingBackend):
    """Records every search and answers each (every ``_msearch`` line alike) with the hits
    ``answer`` gives for its body, ``_source`` filtered as the body asks; ``answer`` may raise,
    as OpenSearch may fail."""

    def __init__(self, answer: Callable[[JSON], Sequence[JSON]]) -> None:
        super().__init__()
        self._answer = answer

    async def search(
        self, *, index: str | None, body: JSON, params: Mapping[str, str], caller: Caller, pipeline: JSON | None = None
    ) -> JSON:
        await super().search(index=index, body=body, params=params, caller=caller, pipeline=pipeline)
        return self._response(body)

    async def msearch(
        self,
        *,
        searches: Sequence[tuple[JSON, JSON]],
        params: Mapping[str, str],
        caller: Caller,
        pipeline: JSON | None = None,
        inline: bool = True,
    ) -> JSON:
        await super().msearch(searches=searches, params=params, caller=caller, pipeline=pipeline, inline=inline)
        return {"responses": [self._response(body) for _, body in searches]}

    def _response(self, body: JSON) -> JSON:
        return response_of([_source_filtered(hit, body.get("_source", True)) for hit in self._answer(body)])


class ClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock also moves with a ``FakeClock``: advancing the fake clock makes
    asyncio's timeouts and timers that fall within it due at once, so a test sees a timeout
    fire without waiting it out."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock
        self._origin = clock.now

    def time(self) -> float:
        return super().time() + (self.clock.now - self._origin)


def run_on(clock: FakeClock, work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` on a ``ClockLoop`` moved by ``clock``."""
    with asyncio.Runner(loop_factory=lambda: ClockLoop(clock)) as runner:
        return runner.run(work)


async def take(clock: FakeClock, seconds: float) -> None:
    """Take ``seconds`` of ``clock`` (on a ``ClockLoop`` moved by it), at once: a timeout that
    ends first fires here, as it would while waiting for real."""
    loop = asyncio.get_running_loop()
    if not isinstance(loop, ClockLoop) or loop.clock is not clock:
        raise RuntimeError("take() needs run_on(clock, ...): on any other loop it would wait for real")
    woken: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not woken.done():  # a timeout that fired first cancelled the wait
            woken.set_result(None)

    loop.call_later(seconds, wake)
    clock.advance(seconds)
    await woken


async def refused_build(pipeline: JSON, services: Services) -> ConfigError:
    """The error building ``pipeline`` (a stored one) raises; closes ``services`` either way."""
    try:
        await default_registry().build("p", PipelineDefinition.parse(pipeline), services, PipelineStats(), inline=False)
    except ConfigError as exc:
        return exc
    finally:
        await services.aclose()
    raise AssertionError("the pipeline was built")
