"""The engine's budget: each processor gets its weighted share of the time left, a failure is
skipped or raised as ``ignore_failure`` says, and the stream hears of the ranked hits once.

Pipelines are built directly from processors defined here. Time is a fake clock that moves
only when a test or processor moves it, so every share is asserted exactly; a budget of
0.3 s keeps the one processor that must time out (on asyncio's real clock) brief.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

import pytest
from answerbox.core.errors import ProcessorError
from answerbox.opensearch import Caller
from answerbox.pipeline.base import (
    JSON,
    PipelineContext,
    ProcessorConfig,
    RequestProcessor,
    ResponseProcessor,
    SearchRequest,
)
from answerbox.pipeline.run.pipeline import Pipeline
from answerbox.pipeline.run.stats import PipelineStats
from answerbox.services import Services

from tests.unit.fakes import FakeClock, pipeline_context

BUDGET_S = 0.3
NO_SERVICES = cast(Services, None)  # these processors use none


class Note(ResponseProcessor[ProcessorConfig]):
    """Notes the time it was given, and that it ran."""

    type_name = "note"
    config_model = ProcessorConfig

    async def process_response(self, request: SearchRequest, response: JSON, ctx: PipelineContext) -> JSON:
        ctx.report.warn(f"{self.name} had {ctx.deadline.left()!r}")
        return {**response, "ran": [*response.get("ran", []), self.name]}


class HeavyNote(Note):
    type_name = "heavy"
    budget_weight = 2.0


class Answer(Note):
    type_name = "answer"
    writes_answer = True


class Stall(ResponseProcessor[ProcessorConfig]):
    """Waits until its share runs out."""

    type_name = "stall"
    config_model = ProcessorConfig

    async def process_response(self, request: SearchRequest, response: JSON, ctx: PipelineContext) -> JSON:
        clock = ctx.deadline.clock
        assert isinstance(clock, FakeClock)
        clock.advance(ctx.deadline.left())  # what real waiting does to the clock, at once
        await asyncio.Event().wait()
        return response


class Broken(ResponseProcessor[ProcessorConfig]):
    type_name = "broken"
    config_model = ProcessorConfig

    async def process_response(self, request: SearchRequest, response: JSON, ctx: PipelineContext) -> JSON:
        raise ValueError("no such field")


class NoteRequest(RequestProcessor[ProcessorConfig]):
    type_name = "note_request"
    config_model = ProcessorConfig

    async def process_request(self, request: SearchRequest, ctx: PipelineContext) -> SearchRequest:
        ctx.report.warn(f"{self.name} had {ctx.deadline.left()!r}")
        return request


def _config(tag: str, *, ignore_failure: bool = False) -> ProcessorConfig:
    return ProcessorConfig(tag=tag, ignore_failure=ignore_failure)


def _pipeline(
    *response: ResponseProcessor[Any], request: tuple[RequestProcessor[Any], ...] = (), timeout_s: float = 10.0
) -> Pipeline:
    return Pipeline(
        id="budget",
        request_processors=list(request),
        response_processors=list(response),
        native=None,
        stats=PipelineStats(),
        timeout_s=timeout_s,
        budget_s=BUDGET_S,
    )


def _request() -> SearchRequest:
    return SearchRequest(index="docs", body={"query": {"match_all": {}}}, params={}, caller=Caller())


def _assert_given(ctx: PipelineContext, name: str, share: float) -> None:
    """``name`` was given exactly ``share`` (to float rounding)."""
    (given,) = [float(w.split(" had ")[1]) for w in ctx.report.warnings if w.startswith(f"{name} had ")]
    assert given == pytest.approx(share, rel=1e-12)


async def test_each_processor_gets_its_weight_over_the_weights_still_to_run() -> None:
    pipeline = _pipeline(
        Note(_config("b"), NO_SERVICES),
        HeavyNote(_config("c"), NO_SERVICES),
        request=(NoteRequest(_config("a"), NO_SERVICES),),
    )
    ctx = pipeline_context()
    request = await pipeline.process_request(_request(), ctx)
    await pipeline.process_response(request, {}, ctx)
    # Weights 1, 1, 2: a quarter of the budget; then, the first having used next to none of
    # its share, a third of what is left; then all that is left.
    _assert_given(ctx, "note_request:a", BUDGET_S / 4)
    _assert_given(ctx, "note:b", BUDGET_S / 3)
    _assert_given(ctx, "heavy:c", BUDGET_S)


async def test_time_already_spent_is_taken_off_the_budget() -> None:
    clock = FakeClock()
    ctx = pipeline_context(clock)
    clock.advance(0.2)
    await _pipeline(Note(_config("late"), NO_SERVICES)).process_response(_request(), {}, ctx)
    _assert_given(ctx, "note:late", 0.1)


async def test_the_processor_timeout_caps_the_share() -> None:
    ctx = pipeline_context()
    await _pipeline(Note(_config("capped"), NO_SERVICES), timeout_s=0.05).process_response(_request(), {}, ctx)
    _assert_given(ctx, "note:capped", 0.05)


async def test_a_timed_out_processor_with_ignore_failure_is_skipped_and_the_next_gets_the_rest(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pipeline = _pipeline(Stall(_config("slow", ignore_failure=True), NO_SERVICES), Note(_config("next"), NO_SERVICES))
    ctx = pipeline_context()
    with caplog.at_level(logging.WARNING, logger="answerbox.pipeline.run.pipeline"):
        response = await pipeline.process_response(_request(), {"hits": {"hits": []}}, ctx)
    assert response == {"hits": {"hits": []}, "ran": ["note:next"]}
    (skipped,) = [w for w in ctx.report.warnings if w.startswith("processor [stall:slow]")]
    assert "failed and was skipped" in skipped
    assert "share of the pipeline's budget" in skipped
    assert any("stall:slow" in record.getMessage() for record in caplog.records)
    # Two of weight 1: the stall got half and used it all; the next gets the other half.
    _assert_given(ctx, "note:next", BUDGET_S / 2)
    assert [(r["tag"], r["status"]) for r in ctx.processor_results] == [("slow", "fail"), ("next", "success")]
    stats = pipeline.stats.snapshot()["nodes"][pipeline.stats.node_id]["search_pipeline"]["pipelines"]["budget"]
    assert stats["response"]["failed"] == 0
    assert stats["response_processors"][0]["stall:slow"]["stats"]["failed"] == 1


async def test_a_failure_without_ignore_failure_fails_the_search() -> None:
    pipeline = _pipeline(Broken(_config("strict"), NO_SERVICES), Note(_config("never"), NO_SERVICES))
    ctx = pipeline_context()
    with pytest.raises(ProcessorError) as raised:
        await pipeline.process_response(_request(), {}, ctx)
    assert raised.value.error_type == "search_pipeline_exception"
    assert raised.value.status == 500
    assert (
        raised.value.reason
        == "processor [broken:strict] failed: it failed unexpectedly (the server's log has the details)"
    )
    assert not any(w.startswith("note:never") for w in ctx.report.warnings)
    stats = pipeline.stats.snapshot()["nodes"][pipeline.stats.node_id]["search_pipeline"]["pipelines"]["budget"]
    assert stats["response"]["failed"] == 1
    assert stats["response"]["current"] == 0


async def test_ranked_hears_the_response_once_just_before_the_first_processor_writing_the_answer() -> None:
    pipeline = _pipeline(
        Note(_config("rerank"), NO_SERVICES),
        Answer(_config("first"), NO_SERVICES),
        Answer(_config("second"), NO_SERVICES),
    )
    heard: list[JSON] = []
    response = await pipeline.process_response(_request(), {}, pipeline_context(), ranked=heard.append)
    assert heard == [{"ran": ["note:rerank"]}]
    assert response["ran"] == ["note:rerank", "answer:first", "answer:second"]


async def test_ranked_is_never_called_without_a_processor_writing_the_answer() -> None:
    heard: list[JSON] = []
    await _pipeline(Note(_config("only"), NO_SERVICES)).process_response(
        _request(), {}, pipeline_context(), ranked=heard.append
    )
    assert heard == []
