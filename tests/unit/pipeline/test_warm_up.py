"""Readiness waits for the LLM's structured-output probe, but never longer than its bound."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
from answerbox.llm import LLMClient
from answerbox.pipeline.catalogue import warm_up
from answerbox.pipeline.catalogue.resolver import PipelineResolver
from answerbox.pipeline.catalogue.store import PipelineStore
from answerbox.pipeline.catalogue.warm_up import WarmUp


class _NoPipelines:
    async def stored(self) -> dict[str, Any]:
        return {}


class _ProbedLLM:
    """An LLM whose probe answers when ``answer`` is set."""

    configured = True

    def __init__(self) -> None:
        self.answer = asyncio.Event()
        self.settings = type("Settings", (), {"timeout_s": 30.0})()

    async def structured(self, *, timeout_s: float | None = None) -> bool:
        await self.answer.wait()
        return True


def _warm_up(llm: _ProbedLLM) -> WarmUp:
    store = cast(PipelineStore, _NoPipelines())
    return WarmUp(store=store, resolver=cast(PipelineResolver, None), llm=cast(LLMClient, llm))


async def test_readiness_waits_for_the_probes_answer() -> None:
    llm = _ProbedLLM()
    started = _warm_up(llm)
    started.start()
    await asyncio.sleep(0.05)
    assert not started.done  # the pipelines are warm, the probe has not answered
    llm.answer.set()
    await asyncio.sleep(0.05)
    assert started.done
    await started.aclose()


async def test_an_llm_that_never_answers_holds_readiness_only_for_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(warm_up, "PROBE_BOUND_S", 0.1)
    started = _warm_up(_ProbedLLM())
    started.start()
    await asyncio.sleep(0.05)
    assert not started.done
    await asyncio.sleep(0.2)
    assert started.done
    await started.aclose()
