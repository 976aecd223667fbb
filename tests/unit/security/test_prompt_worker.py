"""Overrides render in the prompt worker, shipped templates in this process. What the sandbox
does not foresee (one long C call, an allocation past the worker's memory, the worker
killed) stands in as globals of the worker's sandbox (tests/support/faulty_prompt_worker.py):
each fails the render with a 400 while the event loop goes on, and the next render gets a
working worker.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable
from typing import TypeVar

import pytest
from answerbox.core.config import Settings
from answerbox.core.errors import AnswerboxError, ConfigError
from answerbox.prompts import worker as prompt_worker
from answerbox.prompts.library import PromptLibrary

from tests.support import faulty_prompt_worker

T = TypeVar("T")


@pytest.fixture
async def library(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[PromptLibrary]:
    monkeypatch.setattr(prompt_worker, "WORKER_COMMAND", faulty_prompt_worker.COMMAND)
    prompts = PromptLibrary(Settings().templates_dir)
    yield prompts
    await prompts.aclose()


async def _with_lag(work: Awaitable[T]) -> tuple[T | BaseException, float]:
    """What ``work`` gave (or raised), and the longest the event loop left a 10 ms timer waiting meanwhile."""
    longest = 0.0

    async def tick() -> None:
        nonlocal longest
        while True:
            started = time.monotonic()
            await asyncio.sleep(0.01)
            longest = max(longest, time.monotonic() - started - 0.01)

    ticker = asyncio.create_task(tick())
    try:
        result: T | BaseException = await work
    except Exception as exc:
        result = exc
    finally:
        ticker.cancel()
    return result, longest


async def _pid(library: PromptLibrary) -> int:
    return int(await library.get("t", "{{ pid() }}").arender())


async def test_an_override_renders_in_the_worker_and_a_shipped_template_here(library: PromptLibrary) -> None:
    override = library.get("t", "{{ pid() }}: {{ query }} after {{ examples[0].query }}")
    rendered = await override.arender(query="q", examples=[{"query": "e", "output": "o"}])
    pid, text = rendered.split(": ", 1)
    assert int(pid) != os.getpid()
    assert text == "q after e"
    with pytest.raises(TypeError, match="renders in the prompt worker"):
        override.render(query="q")
    shipped = library.get("query_expansion/q2d_zs.j2")
    assert await shipped.arender(query="q") == shipped.render(query="q")


async def test_a_shipped_template_needs_no_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prompt_worker, "WORKER_COMMAND", (sys.executable, "-c", "raise SystemExit(3)"))
    library = PromptLibrary(Settings().templates_dir)
    try:
        assert await library.get("query_expansion/q2d_zs.j2").arender(query="q")
        with pytest.raises(AnswerboxError, match="the prompt worker did not start"):
            await library.get("t", "{{ query }}").arender(query="q")
    finally:
        await library.aclose()


async def test_a_long_c_call_is_stopped_at_the_timeout_without_stalling_the_loop(library: PromptLibrary) -> None:
    before = await _pid(library)
    started = time.monotonic()
    refused, lag = await _with_lag(library.get("t", "{{ stall() }} {{ query }}").arender(query="q"))
    assert isinstance(refused, ConfigError)
    assert refused.reason == (
        f"prompt [t (override)] did not render within {prompt_worker.RENDER_TIMEOUT_S:g}s and was stopped"
    )
    assert time.monotonic() - started < prompt_worker.RENDER_TIMEOUT_S + 1
    assert lag < 0.2, lag
    assert await _pid(library) != before  # a fresh worker


async def test_an_allocation_past_the_workers_memory_is_a_template_error(library: PromptLibrary) -> None:
    before = await _pid(library)
    refused, lag = await _with_lag(library.get("t", "{{ hog() }}").arender())
    assert isinstance(refused, ConfigError)
    assert refused.reason == "prompt [t (override)] failed to render: MemoryError"
    assert lag < 0.2, lag
    assert await _pid(library) == before  # the worker lives on


async def test_a_killed_worker_fails_its_render_and_is_replaced(library: PromptLibrary) -> None:
    before = await _pid(library)
    with pytest.raises(ConfigError, match=r"prompt \[t \(override\)\] stopped the process rendering it"):
        await library.get("t", "{{ crash() }}").arender()
    assert await _pid(library) != before
    assert await library.get("t", "{{ query }}!").arender(query="q") == "q!"


async def test_a_render_its_caller_gave_up_on_leaves_no_reply_for_the_next(library: PromptLibrary) -> None:
    before = await _pid(library)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.1):
            await library.get("t", "{{ stall() }}").arender()
    assert await library.get("t", "{{ query }}").arender(query="next") == "next"
    assert await _pid(library) != before
