"""A replica's start: every stored pipeline built and warmed up (its models loaded) before
readiness says yes, so no search pays a model load within its time budget; and, beside it, the
LLM asked once which structured output it takes, so that no search's budget pays the probe
either. Readiness waits for that answer at most ``PROBE_BOUND_S``: the LLM is optional, and a
search whose LLM was down or slow at the start probes again."""

from __future__ import annotations

import asyncio
import logging
from contextlib import suppress

from answerbox.core.errors import AnswerboxError
from answerbox.llm import LLMClient
from answerbox.pipeline.catalogue.resolver import PipelineResolver
from answerbox.pipeline.catalogue.store import PipelineStore

__all__ = ["WarmUp"]

logger = logging.getLogger(__name__)

PROBE_BOUND_S = 10.0


class WarmUp:
    def __init__(self, *, store: PipelineStore, resolver: PipelineResolver, llm: LLMClient | None = None) -> None:
        self._store = store
        self._resolver = resolver
        self._llm = llm
        self._task: asyncio.Task[None] | None = None
        self._probe: asyncio.Task[None] | None = None

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._run())
        if self._llm is not None and self._llm.configured:
            self._probe = loop.create_task(self._settle_structured(self._llm))

    @property
    def done(self) -> bool:
        """Whether readiness may say yes: the pipelines warmed up and the LLM's probe answered
        (or ``PROBE_BOUND_S`` passed)."""
        return self._task is not None and self._task.done() and (self._probe is None or self._probe.done())

    @staticmethod
    async def _settle_structured(llm: LLMClient) -> None:
        with suppress(TimeoutError):
            async with asyncio.timeout(PROBE_BOUND_S):
                await llm.structured(timeout_s=llm.settings.timeout_s)

    async def _run(self) -> None:
        try:
            stored = await self._store.stored()
        except AnswerboxError as exc:
            # The cluster's own check says what is wrong; searches warm their pipeline up as they come.
            logger.warning("the stored pipelines could not be read to warm them up: %s", exc.reason)
            return
        for pipeline_id, definition in stored.items():
            try:
                pipeline = await self._resolver.build(pipeline_id, definition)
            except AnswerboxError as exc:
                logger.warning("stored pipeline %s no longer builds: %s", pipeline_id, exc.reason)
                continue
            await pipeline.warm_up()

    async def aclose(self) -> None:
        for task in (self._task, self._probe):
            if task is not None and not task.done():
                task.cancel()
                with suppress(asyncio.CancelledError):
                    await task
