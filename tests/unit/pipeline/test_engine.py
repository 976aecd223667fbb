"""The engine on its own: a real ``SearchEngine`` over a fake resolver, a recording backend and a
fake clock. What it sends OpenSearch, what it times, and each ``_msearch`` line's answer.

The backend takes ``SEARCH_S`` of the clock; the pipeline's request and response processors take
more of it on either side, so the search's time is right only when measured around the call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, cast

import pytest
from answerbox.core.config import OpenSearchSettings, Settings
from answerbox.core.errors import error_body
from answerbox.memory import Memory
from answerbox.opensearch import Caller, OpenSearchClients
from answerbox.pipeline.base import (
    JSON,
    PipelineContext,
    Processor,
    ProcessorConfig,
    RequestProcessor,
    ResponseProcessor,
    SearchRequest,
)
from answerbox.pipeline.catalogue.resolver import PipelineResolver
from answerbox.pipeline.limits.request_limits import ConfigContext
from answerbox.pipeline.run.engine import SearchEngine
from answerbox.pipeline.run.msearch import MsearchRunner
from answerbox.pipeline.run.pipeline import Pipeline
from answerbox.pipeline.run.stats import PipelineStats
from answerbox.processors.query_expansion import LLMQueryExpansion
from answerbox.processors.retrieval_evaluator import RetrievalEvaluator
from answerbox.services import Services

from tests.unit.fake_opensearch import FakeOpenSearch
from tests.unit.fake_services import FakeEvaluator, FakeServices, fake_models
from tests.unit.fakes import FakeClock, RecordingBackend, response_of

SEARCH_S = 0.25
REQUEST_S = 1.0
RESPONSE_S = 2.0
HITS = [{"_index": "docs", "_id": "1", "_score": 1.0, "_source": {"title": "dune"}}]
QUERY = {"match": {"title": "dune"}}
NO_SERVICES = cast(Services, None)  # these processors use none


def _take(ctx: PipelineContext, seconds: float) -> None:
    clock = ctx.deadline.clock
    assert isinstance(clock, FakeClock)
    clock.advance(seconds)


class SlowRequest(RequestProcessor[ProcessorConfig]):
    type_name = "slow_request"
    config_model = ProcessorConfig

    async def process_request(self, request: SearchRequest, ctx: PipelineContext) -> SearchRequest:
        _take(ctx, REQUEST_S)
        return request


class SlowResponse(ResponseProcessor[ProcessorConfig]):
    type_name = "slow_response"
    config_model = ProcessorConfig

    async def process_response(self, request: SearchRequest, response: JSON, ctx: PipelineContext) -> JSON:
        _take(ctx, RESPONSE_S)
        return response


class FakeResolver(PipelineResolver):
    """Resolves every search to ``pipeline`` (None: no answerbox pipeline applies)."""

    def __init__(self, pipeline: Pipeline | None) -> None:  # no store, registry or cluster
        self.pipeline = pipeline

    async def resolve(self, index: str | None, body: dict[str, Any], params: Mapping[str, str]) -> Pipeline | None:
        return self.pipeline


class TimedBackend(RecordingBackend):
    """Records every search and answers each with ``HITS``, after ``SEARCH_S`` of ``clock``."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock

    async def search(
        self, *, index: str | None, body: JSON, params: Mapping[str, str], caller: Caller, pipeline: JSON | None = None
    ) -> JSON:
        await super().search(index=index, body=body, params=params, caller=caller, pipeline=pipeline)
        self.clock.advance(SEARCH_S)
        return response_of(HITS)

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
        self.clock.advance(SEARCH_S)
        return {"responses": [response_of(HITS) for _ in searches]}  # no "took": the engine's own is kept


def _pipeline() -> Pipeline:
    config = ProcessorConfig(tag="t")
    return Pipeline(
        id="answers",
        request_processors=[SlowRequest(config, NO_SERVICES)],
        response_processors=[SlowResponse(config, NO_SERVICES)],
        native=None,
        stats=PipelineStats(),
        timeout_s=10.0,
        budget_s=10.0,
    )


@pytest.fixture
async def memory() -> AsyncIterator[Memory]:
    """Never read: the searches have no memory_id, and a caller without credentials has no identity."""
    clients = OpenSearchClients(OpenSearchSettings(), connection_class=FakeOpenSearch().connection())
    yield Memory(Settings().memory, clients)
    await clients.aclose()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def backend(clock: FakeClock) -> TimedBackend:
    return TimedBackend(clock)


def _engine(pipeline: Pipeline | None, backend: TimedBackend, memory: Memory, clock: FakeClock) -> SearchEngine:
    resolver = FakeResolver(pipeline)
    return SearchEngine(resolver=resolver, backend=backend, memory=memory, settings=Settings(), clock=clock)


async def test_open_gives_no_run_when_no_pipeline_applies(
    backend: TimedBackend, memory: Memory, clock: FakeClock
) -> None:
    engine = _engine(None, backend, memory, clock)
    assert await engine.open(index="docs", body={"query": QUERY}, params={}, caller=Caller()) is None
    assert backend.calls == []


async def test_the_search_time_is_the_clock_time_of_the_backend_call_alone(
    backend: TimedBackend, memory: Memory, clock: FakeClock
) -> None:
    engine = _engine(_pipeline(), backend, memory, clock)
    run = await engine.open(index="docs", body={"query": QUERY}, params={}, caller=Caller())
    assert run is not None
    response = await engine.run(run)
    timings = response["ext"]["answerbox"]["timings_ms"]
    assert timings["search"] == SEARCH_S * 1000
    assert timings["total"] == (REQUEST_S + SEARCH_S + RESPONSE_S) * 1000
    assert [hit["_id"] for hit in response["hits"]["hits"]] == ["1"]


@pytest.mark.parametrize(
    ("ext", "sent_ext"),
    [
        ({"other_plugin": {"k": "v"}}, {"other_plugin": {"k": "v"}}),
        ({}, None),  # nothing left: no ext at all
    ],
)
async def test_own_params_and_ext_keys_are_not_sent_upstream(
    backend: TimedBackend, memory: Memory, clock: FakeClock, ext: JSON, sent_ext: JSON | None
) -> None:
    engine = _engine(_pipeline(), backend, memory, clock)
    body = {
        "query": QUERY,
        "search_pipeline": "answers",
        "ext": {"answerbox": {"note": 1}, "generative_qa_parameters": {"llm_question": "who?"}, **ext},
    }
    params = {"search_pipeline": "answers", "verbose_pipeline": "true", "routing": "r1"}
    run = await engine.open(index="docs", body=body, params=params, caller=Caller())
    assert run is not None
    response = await engine.run(run)
    (call,) = backend.calls
    assert (call.method, call.index, call.params) == ("search", "docs", {"routing": "r1"})
    # The caller's search_pipeline is answerbox's; OpenSearch gets its own part, inline (none here).
    assert call.body == {"query": QUERY, "search_pipeline": {}} | ({"ext": sent_ext} if sent_ext else {})
    assert [r["processor_name"] for r in response["processor_results"]] == ["slow_request", "slow_response"]


async def test_msearch_answers_each_line_one_upstream_msearch_for_the_lines_that_run(
    backend: TimedBackend, memory: Memory, clock: FakeClock
) -> None:
    runner = MsearchRunner(_engine(_pipeline(), backend, memory, clock))
    pairs: list[tuple[JSON, JSON]] = [
        ({"index": "docs"}, {"query": QUERY, "size": 5000}),
        ({"index": "books", "routing": "r2", "search_pipeline": "answers"}, {"query": QUERY, "size": 3}),
    ]
    lines = await runner.lines(pairs, index=None, params={})
    assert lines is not None
    answer = await runner.run(lines, params={"search_pipeline": "answers"}, caller=Caller())
    too_many, ran = answer["responses"]
    reason = "[from] + [size] is 5000, above limits.max_search_size (1000) for a search pipeline answerbox runs"
    assert too_many == error_body(400, "illegal_argument_exception", reason)
    assert [hit["_id"] for hit in ran["hits"]["hits"]] == ["1"]
    assert ran["ext"]["answerbox"]["timings_ms"]["search"] == SEARCH_S * 1000
    assert answer["took"] == round(SEARCH_S * 1000)
    (call,) = backend.calls
    assert (call.method, call.params) == ("msearch", {})
    assert call.body == [({"index": "books", "routing": "r2"}, {"query": QUERY, "size": 3, "search_pipeline": {}})]


@pytest.mark.parametrize(
    ("asked", "params", "skipped"),
    [
        ({"sort": [{"year": "desc"}]}, {}, {"llm_query_expansion": "reads no score"}),
        ({"size": 0}, {}, {"llm_query_expansion": "reads no score", "retrieval_evaluator": "no hits (size 0)"}),
        ({}, {"scroll": "1m"}, {"retrieval_evaluator": "opens a scroll"}),
        ({}, {}, {}),
    ],
    ids=["sorted", "size-0", "scroll", "plain"],
)
async def test_a_verbose_search_s_plan_is_what_each_step_ran_with(
    asked: JSON, params: dict[str, str], skipped: dict[str, str], memory: Memory, clock: FakeClock
) -> None:
    services = FakeServices(replies=["sand"], models=fake_models(evaluator=FakeEvaluator(lambda q, p: 0.5)))
    expansion = LLMQueryExpansion.from_dict({}, services, ConfigContext())
    evaluator = RetrievalEvaluator.from_dict({"rerank": True, "corrective": None}, services, ConfigContext())
    assert isinstance(expansion, LLMQueryExpansion)
    assert isinstance(evaluator, RetrievalEvaluator)
    steps: list[Processor[Any]] = [expansion, evaluator]
    pipeline = Pipeline(
        id="answers",
        request_processors=[expansion],
        response_processors=[evaluator],
        native=None,
        stats=PipelineStats(),
        timeout_s=10.0,
        budget_s=10.0,
    )
    engine = _engine(pipeline, TimedBackend(clock), memory, clock)
    body = {"query": {"match": {"title": "dune"}}, **asked}
    run = await engine.open(index="docs", body=body, params={"verbose_pipeline": "true", **params}, caller=Caller())
    assert run is not None
    response = await run.run()
    plan = response["ext"]["answerbox"]["plan"]
    for step, processor in zip(plan["steps"], steps, strict=True):
        ran = run.ctx.plans[processor]
        assert step["values"] == {name: v.model_dump() for name, v in ran.values().items()}
        assert step["skipped"] == ran.skipped
        assert (skipped.get(processor.type_name) or "-") in (ran.skipped or "-")
    retrieval = run.ctx.report.retrieval
    evaluated = plan["steps"][1]["values"]
    if "sort" in asked:  # the caller's order is kept: no rerank, and the plan says why
        assert (evaluated["rerank"], evaluated["sorted_by"]) == (
            {"value": False, "source": "request"},
            {"value": "year", "source": "request"},
        )
        assert retrieval is not None
        assert retrieval.reranked is False
    elif skipped.get("retrieval_evaluator"):
        assert retrieval is None
    else:
        assert retrieval is not None
        assert retrieval.reranked is True
        assert evaluated["rerank"] == {"value": True, "source": "pipeline"}
    assert bool(services.llm.calls) is ("llm_query_expansion" not in skipped)
