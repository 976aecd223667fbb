"""A search's time, on one clock: when it started, when the running step must end, and every
share of what is left that a processor or its parts may take.

The clock is injectable (``clock``): the engine's and processors' tests run on a fake one and
assert shares exactly. Waiting is still asyncio's (``asyncio.timeout(deadline.left())``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

__all__ = ["Deadline"]

# The share of its time left a processor's own work may take: the rest is a margin in which
# work out of time can still degrade (a fallback, a warning) before the engine's timeout fails it.
_WORK_SHARE = 0.9


class Deadline:
    def __init__(self, clock: Callable[[], float] = time.perf_counter, *, seconds: float = math.inf) -> None:
        self.clock = clock
        self.started = clock()
        self.seconds = seconds  # what it was given
        self._end = self.started + seconds

    def elapsed_s(self) -> float:
        return self.clock() - self.started

    def elapsed_ms(self) -> float:
        return self.elapsed_s() * 1000

    def weighted(self, budget_s: float, weight: float, weights: float, cap_s: float) -> float:
        """A step's share of ``budget_s`` (counted from the start): what is left of it times
        ``weight`` over the ``weights`` of the steps still to run, at most ``cap_s``."""
        left = max(0.0, budget_s - self.elapsed_s())
        return min(cap_s, left * weight / weights)

    def start_step(self, seconds: float) -> None:
        """The running step must end ``seconds`` from now."""
        self._end = self.clock() + seconds

    def left(self) -> float:
        """Seconds the running step has left: its LLM calls and searches must fit in them."""
        return max(0.0, self._end - self.clock())

    def share(self, fraction: float) -> float:
        """``fraction`` of the running step's time left: what one part of it may take."""
        return self.left() * fraction

    def for_work(self) -> float:
        """What a step's own work may take: its time left less a margin to degrade in."""
        return self.share(_WORK_SHARE)

    def within(self, seconds: float) -> Deadline:
        """A deadline for a part of the step: ``seconds`` from now, on the same clock."""
        return Deadline(self.clock, seconds=min(seconds, self.left()))
