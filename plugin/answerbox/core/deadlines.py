"""``asyncio.timeout`` for deadlines that nearly never pass, sharing one loop timer.

``asyncio.timeout`` makes a loop timer on entry and cancels it on exit: on uvloop that is
about 10 µs, paid by every request whose body is read under ``limits.body_timeout_s``, though
a body nearly always arrives long before it. Here the deadlines of one loop share one timer,
armed for the earliest; a block that ends only drops its entry.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from weakref import WeakKeyDictionary

__all__ = ["within"]


class _Deadlines:
    """The open deadlines of one loop, and the one timer armed for the earliest of them."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._open: set[_Within] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._armed_at = 0.0

    def add(self, block: _Within) -> None:
        self._open.add(block)
        # The same duration each time: a later deadline rides on the timer already armed.
        if self._timer is None or block.at < self._armed_at:
            self._arm(block.at)

    def discard(self, block: _Within) -> None:
        self._open.discard(block)

    def _arm(self, at: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._armed_at = at
        self._timer = self._loop.call_at(at, self._expire)

    def _expire(self) -> None:
        # The loop may run a timer a little before its time by its own clock: what the timer was
        # armed for has come, whatever loop.time() says.
        self._timer = None
        now = max(self._loop.time(), self._armed_at)
        for block in [block for block in self._open if block.at <= now]:
            self._open.discard(block)
            block.expire()
        if self._open:
            self._arm(min(block.at for block in self._open))


_by_loop: WeakKeyDictionary[asyncio.AbstractEventLoop, _Deadlines] = WeakKeyDictionary()


class _Within:
    """One block's deadline; raises TimeoutError out of the block once it has passed, as
    ``asyncio.timeout`` does (the task is cancelled, and the cancellation it made is taken back)."""

    __slots__ = ("_cancelling", "_deadlines", "_expired", "_seconds", "_task", "at")

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._expired = False

    async def __aenter__(self) -> None:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("within() must be used inside a task")
        loop = asyncio.get_running_loop()
        self._task = task
        self._cancelling = task.cancelling()
        self.at = loop.time() + self._seconds
        deadlines = _by_loop.get(loop)
        if deadlines is None:
            deadlines = _by_loop[loop] = _Deadlines(loop)
        self._deadlines = deadlines
        deadlines.add(self)

    def expire(self) -> None:
        self._expired = True
        self._task.cancel()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._deadlines.discard(self)
        if self._expired and self._task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc


def within(seconds: float) -> _Within:
    """``async with within(seconds):`` ends the block with TimeoutError once ``seconds`` have passed."""
    return _Within(seconds)
