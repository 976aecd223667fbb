"""The pipeline runner: answerbox request processors → OpenSearch → answerbox response processors.

Time: a pipeline has a budget (``budget_s``) that its processors share. Each, when it starts,
gets the time left times its ``budget_weight`` over the weights of the processors still to run
(its own included), capped by the processor timeout; what one leaves unused goes to those
after it. So a slow chain cannot eat the answer's time. A processor reads its own share
from ``ctx.deadline`` (``left()``, ``for_work()``, ``share(fraction)``).

Ordering rule for mixed pipelines: processor types answerbox does not implement are
OpenSearch's own, and run inside OpenSearch, sent with the search as an inline pipeline.
So every answerbox request processor runs before OpenSearch's request processors, and
every OpenSearch response processor runs before answerbox's response processors. Within
each group the declared order holds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from answerbox.core.errors import ModelError, ProcessorError, failure_reason
from answerbox.pipeline.base import JSON, PipelineContext, Processor, RequestProcessor, ResponseProcessor, SearchRequest
from answerbox.pipeline.catalogue.definition import AD_HOC_PIPELINE_ID, PipelineDefinition
from answerbox.pipeline.run.stats import Phase, PipelineStats

__all__ = ["CONVERSATION", "Pipeline"]

# The request processor that rewrites a follow-up into a standalone question.
CONVERSATION = "conversation"

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(kw_only=True)
class Pipeline:
    id: str
    request_processors: list[RequestProcessor[Any]]
    response_processors: list[ResponseProcessor[Any]]
    # The processors OpenSearch runs itself, or None when there are none.
    native: PipelineDefinition | None
    stats: PipelineStats
    timeout_s: float  # one processor's cap
    budget_s: float  # all processors of one search together
    budget_from_pipeline: bool = False  # else limits.pipeline_budget_s
    # What rewrites a follow-up (a search with ``memory_id``): the pipeline's own ``conversation``
    # processor, else one with its defaults, which runs first for such searches only.
    conversation: RequestProcessor[Any] | None = None
    # Whether ``conversation`` runs first because the search named a memory (``for_conversation``).
    conversation_added: bool = False
    # Set once every processor has warmed up: a search then awaits nothing more.
    _warm: bool = field(default=False, init=False, repr=False, compare=False)

    @property
    def native_rag(self) -> bool:
        """Whether OpenSearch's own retrieval_augmented_generation processor runs in this pipeline."""
        return self.native is not None and any(
            "retrieval_augmented_generation" in e for e in self.native.response_processors
        )

    @property
    def inline_native(self) -> JSON:
        """The OpenSearch-side processors as an inline pipeline; empty when there are none."""
        return self.native.to_json() if self.native is not None else {}

    @property
    def writes_answer(self) -> bool:
        return self.answer_step is not None

    @property
    def answer_step(self) -> ResponseProcessor[Any] | None:
        """The one step that writes the search's answer: the last that may (``writes_answer``)."""
        return next((p for p in reversed(self.response_processors) if p.writes_answer), None)

    async def warm_up(self) -> None:
        """Every processor's ``warm_up``: what a model needs loads here, never within a search's
        budget. A model that cannot load is left to its processors, which degrade and say why."""
        if self._warm:
            return
        processors = [*self.request_processors, *self.response_processors]
        if self.conversation is not None:
            processors.append(self.conversation)
        try:
            await asyncio.gather(*(p.warm_up() for p in processors))
        except ModelError as exc:
            # Not warm: the next search tries the load again.
            logger.warning("pipeline %s: its models cannot load: %s", self.id, exc.reason)
            return
        self._warm = True

    def for_conversation(self) -> Pipeline:
        """This pipeline as a search with a memory runs it: its ``conversation`` processor first."""
        if self.conversation is None or self.conversation in self.request_processors:
            return self
        return replace(self, request_processors=[self.conversation, *self.request_processors], conversation_added=True)

    async def process_request(self, request: SearchRequest, ctx: PipelineContext) -> SearchRequest:
        return await self._phase(
            "request",
            ctx,
            request,
            [(p, lambda current, p=p: p.process_request(current, ctx)) for p in self.request_processors],  # type: ignore[misc]
        )

    async def process_response(
        self,
        request: SearchRequest,
        response: JSON,
        ctx: PipelineContext,
        *,
        ranked: Callable[[JSON], None] | None = None,
    ) -> JSON:
        """``ranked`` is told the response just before the first processor that writes the answer."""

        def step(p: ResponseProcessor[Any]) -> Callable[[JSON], Awaitable[JSON]]:
            async def run(current: JSON) -> JSON:
                if ranked is not None and p is first_writer:
                    ranked(current)
                return await p.process_response(request, current, ctx)

            return run

        first_writer = next((p for p in self.response_processors if p.writes_answer), None)
        return await self._phase("response", ctx, response, [(p, step(p)) for p in self.response_processors])

    def _share(self, processor: Processor[Any], ctx: PipelineContext) -> float:
        """The seconds ``processor`` may take now: its weighted part of the budget left."""
        order = [*self.request_processors, *self.response_processors]
        rest = order[order.index(processor) :]
        return ctx.deadline.weighted(
            self.budget_s, processor.budget_weight, sum(p.budget_weight for p in rest), self.timeout_s
        )

    async def _phase(
        self,
        phase: Phase,
        ctx: PipelineContext,
        value: T,
        steps: list[tuple[Processor[Any], Callable[[T], Awaitable[T]]]],
    ) -> T:
        if not steps:
            return value
        self.stats.start(self.id, phase)
        clock = ctx.deadline.clock
        started = clock()
        failed = False
        try:
            for processor, step in steps:
                plan = ctx.plans.get(processor)
                if plan is not None and plan.skipped:  # the search makes it pointless (``pipeline/run/plan.py``)
                    processor.warn(ctx, plan.skipped)
                    continue
                value = await self._step(phase, ctx, processor, step, value)
            return value
        except BaseException:
            failed = True
            raise
        finally:
            self.stats.finish(self.id, phase, (clock() - started) * 1000, failed)

    async def _step(
        self, phase: Phase, ctx: PipelineContext, processor: Processor[Any], step: Callable[[T], Awaitable[T]], value: T
    ) -> T:
        clock = ctx.deadline.clock
        started = clock()
        share = self._share(processor, ctx)
        ctx.deadline.start_step(share)
        error: Exception | None = None
        reason = ""
        try:
            async with asyncio.timeout(share):
                result = await step(value)
        except TimeoutError as exc:
            error = TimeoutError(f"took longer than its {share:.3g}s share of the pipeline's budget")
            error.__cause__ = exc
            reason = str(error)  # our own sentence: the caller may read it
        except Exception as exc:  # a processor may fail in any way; ignore_failure decides
            error = exc
            reason = failure_reason(exc)
        millis = (clock() - started) * 1000
        ignored = error is not None and processor.config.ignore_failure
        # A search's own pipeline is counted by processor type: its tags are the caller's to
        # invent, and each would be a new metric label.
        counted = processor.type_name if self.id == AD_HOC_PIPELINE_ID else processor.name
        self.stats.processor(self.id, phase, counted, processor.type_name, millis, error is not None, ignored)
        ctx.report.timings_ms[processor.name] = round(millis, 2)
        ctx.processor_results.append(
            {
                "processor_name": processor.type_name,
                "tag": processor.config.tag,
                "duration_millis": round(millis),
                "status": "success" if error is None else "fail",
                **({"error": reason} if error is not None else {}),
            }
        )
        if error is None:
            return result
        # The caller reads ``reason``; the exception, with its text and traceback, is logged.
        logger.warning(
            "processor %s in pipeline %s failed%s: %r",
            processor.name,
            self.id,
            " and was ignored" if ignored else "",
            error,
            exc_info=error,
        )
        if not ignored:
            raise ProcessorError.from_exception(processor.type_name, processor.config.tag, error, reason) from error
        ctx.report.warn(f"processor [{processor.name}] failed and was skipped: {reason}")
        return value
