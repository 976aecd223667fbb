"""``core.deadlines.within``: blocks sharing one loop timer each end at their own deadline, as
``asyncio.timeout`` would, and a block that ends in time leaves its task alone."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref
from collections.abc import Callable

import pytest
import uvloop
from answerbox.core.loop_timeouts import within


async def _blocked(seconds: float, deadline: float) -> float:
    """How long a block sleeping ``seconds`` under ``within(deadline)`` ran before TimeoutError."""
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        async with within(deadline):
            await asyncio.sleep(seconds)
    return time.monotonic() - started


async def test_a_block_past_its_deadline_ends_in_timeout_error_at_that_deadline() -> None:
    elapsed = await _blocked(5, 0.05)
    assert 0.04 <= elapsed < 1


async def test_a_block_that_ends_in_time_leaves_its_task_uncancelled() -> None:
    async with within(0.05):
        await asyncio.sleep(0)
    # Past the deadline the block had: the task is not cancelled by it.
    await asyncio.sleep(0.1)
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


async def test_a_shorter_deadline_opened_later_ends_first() -> None:
    """The timer is armed for the earliest deadline: one opened after a long one still ends on time."""
    long = asyncio.create_task(_blocked(5, 2))
    await asyncio.sleep(0.01)
    assert await _blocked(5, 0.05) < 1
    assert not long.done()
    long.cancel()


async def test_concurrent_blocks_each_end_at_their_own_deadline() -> None:
    results = await asyncio.gather(_blocked(5, 0.05), _blocked(5, 0.3), _blocked(0.01, 5), return_exceptions=True)
    first, second, in_time = results
    assert isinstance(first, float)
    assert first < 0.25
    assert isinstance(second, float)
    assert 0.25 <= second < 1.5
    # The sleep of 0.01 s ended inside its 5 s block: no TimeoutError, so pytest.raises failed it.
    assert isinstance(in_time, pytest.fail.Exception)


async def test_a_cancellation_from_outside_stays_a_cancellation() -> None:
    async def guarded() -> None:
        async with within(5):
            await asyncio.sleep(5)

    task = asyncio.create_task(guarded())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.parametrize("new_loop", [asyncio.new_event_loop, uvloop.new_event_loop], ids=["asyncio", "uvloop"])
def test_a_closed_loop_is_not_kept_alive_by_its_deadlines(new_loop: Callable[[], asyncio.AbstractEventLoop]) -> None:
    """A block that ended leaves the timer armed for its deadline; the loop, once closed and
    dropped, is still collected (its deadlines are kept by a mapping that holds it weakly)."""

    async def in_time() -> None:
        async with within(30):
            await asyncio.sleep(0)

    loop = new_loop()
    loop.run_until_complete(in_time())
    loop.close()
    dropped = weakref.ref(loop)
    del loop
    gc.collect()
    assert dropped() is None
