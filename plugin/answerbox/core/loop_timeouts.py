"""``asyncio.timeout`` for deadlines that nearly never pass, sharing one loop timer.

``asyncio.timeout`` makes a loop timer on entry and cancels it on exit: on uvloop that is
about 10 µs, paid by every request whose body is read under ``limits.body_timeout_s``, though
a body nearly always arrives long before it. Here the deadlines of one loop share one timer,
armed for the earliest; a block that ends only drops its entry.
"""

from __future__ import annotations

import asyncio
import weakref
from types import TracebackType

__all__ = ["within"]


class _Deadlines:
    """The open deadlines of one loop, and the one timer armed for the earliest of them. It holds
    neither the loop nor that timer (which refers to the loop) strongly: it is the value of a
    mapping that holds the loop weakly, and the loop holds a pending timer itself."""

    def __init__(self) -> None:
        self._open: set[_Within] = set()
        self._timer: weakref.ref[asyncio.TimerHandle] | None = None
        self._armed_at = 0.0

    def add(self, block: _Within, loop: asyncio.AbstractEventLoop) -> None:
        self._open.add(block)
        # The same duration each time: a later deadline rides on the timer already armed.
        timer = None if self._timer is None else self._timer()
        if timer is None or block.at < self._armed_at:
            if timer is not None:
                timer.cancel()
            self._arm(loop, block.at)

    def discard(self, block: _Within) -> None:
        self._open.discard(block)

    def _arm(self, loop: asyncio.AbstractEventLoop, at: float) -> None:
        self._armed_at = at
        self._timer = weakref.ref(loop.call_at(at, self._expire))

    def _expire(self) -> None:
        self._timer = None
        loop = asyncio.get_running_loop()
        # The loop may run a timer a little before its time by its own clock: what the timer was
        # armed for has come, whatever loop.time() says.
        now = max(loop.time(), self._armed_at)
        for block in [block for block in self._open if block.at <= now]:
            self._open.discard(block)
            block.expire()
        if self._open:
            self._arm(loop, min(block.at for block in self._open))


_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Deadlines] = weakref.WeakKeyDictionary()


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
            deadlines = _by_loop[loop] = _Deadlines()
        self._deadlines = deadlines
        deadlines.add(self, loop)

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
