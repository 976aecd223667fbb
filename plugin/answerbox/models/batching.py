"""A dynamic micro-batcher: items from concurrent async callers share model batches.

Callers ``await submit(items)``. A worker task collects pending items until ``max_batch``
are waiting or the oldest has waited ``max_wait_s``, then takes everything pending as one
round, sorts the round by length and cuts it into batches of at most ``max_batch`` where
padding would cost more than another model call (:func:`partition`: a search's short title
fields do not pad to its long passages), and runs them on a single worker thread: inference
never blocks the event loop, and one batch runs at a time so ONNX Runtime's own threads are
not oversubscribed.

Work nobody waits for is not done: a caller that gave up (a timeout, a client that left) is
dropped from every batch not yet started. The queue is bounded: past ``max_pending`` items a
submit fails at once with ``QueueFull`` rather than queueing work no caller will live to see,
and so is each owner's share of it (``work_owner``, set by the search's admission): one
caller cannot fill the queue that every other caller's searches need.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence, Sized
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from answerbox.core.work_owner import work_owner

__all__ = ["BatchStats", "MicroBatcher", "QueueFull", "partition"]

T = TypeVar("T", bound=Sized)
R = TypeVar("R")

# What one more model call costs, in padded positions (items x length): the per-call work
# of ONNX Runtime, about that of a 64-token window on MiniLM.
BATCH_COST = 64


def partition(lengths: Sequence[int], max_batch: int, batch_cost: int = BATCH_COST) -> list[range]:
    """Cut items of ascending ``lengths`` into consecutive batches of at most ``max_batch`` items,
    with the least padded size (each batch pads to its longest) plus ``batch_cost`` per batch."""
    best = [0.0] + [math.inf] * len(lengths)  # best[j]: the cheapest cut of the first j items
    start = [0] * (len(lengths) + 1)
    for j in range(1, len(lengths) + 1):
        for i in range(max(0, j - max_batch), j):
            cost = best[i] + (j - i) * lengths[j - 1] + batch_cost
            if cost < best[j]:
                best[j], start[j] = cost, i
    batches, j = [], len(lengths)
    while j:
        batches.append(range(start[j], j))
        j = start[j]
    return batches[::-1]


@dataclass
class BatchStats:
    batches: int = 0
    items: int = 0
    # Seconds each recent item spent queued before its batch started: the batcher's added latency.
    waits_s: deque[float] = field(default_factory=lambda: deque(maxlen=10_000))

    @property
    def mean_batch(self) -> float:
        return self.items / self.batches if self.batches else 0.0


class QueueFull(Exception):
    """More items are queued than ``max_pending``."""


class MicroBatcher(Generic[T, R]):
    def __init__(
        self,
        run_batch: Callable[[list[T]], list[R]],
        *,
        max_batch: int,
        max_wait_s: float,
        max_pending: int = 4096,
        name: str = "model",
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        if max_wait_s < 0:
            raise ValueError(f"max_wait_s must be >= 0, got {max_wait_s}")
        self._run_batch = run_batch
        self._max_batch = max_batch
        self._max_wait_s = max_wait_s
        self._max_pending = max_pending
        self._max_per_owner = max(max_pending // 4, 1)
        self._owned: Counter[str | None] = Counter()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"answerbox-{name}")
        self._pending: list[tuple[T, asyncio.Future[R], float]] = []
        self._arrived = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.stats = BatchStats()

    async def submit(self, items: Sequence[T]) -> list[R]:
        if not items:
            return []
        loop = asyncio.get_running_loop()
        self._ensure_worker(loop)
        if len(self._pending) + len(items) > self._max_pending:
            raise QueueFull(f"{len(self._pending)} items are queued; {len(items)} more would pass {self._max_pending}")
        owner = work_owner.get()
        if owner is not None and self._owned[owner] + len(items) > self._max_per_owner:
            raise QueueFull(
                f"this caller has {self._owned[owner]} items queued; {len(items)} more would pass {self._max_per_owner}"
            )
        now = time.monotonic()
        futures: list[asyncio.Future[R]] = [loop.create_future() for _ in items]
        self._pending.extend((item, future, now) for item, future in zip(items, futures, strict=True))
        self._arrived.set()
        self._owned[owner] += len(items)
        try:
            return list(await asyncio.gather(*futures))
        finally:
            self._owned[owner] -= len(items)
            if not self._owned[owner]:
                del self._owned[owner]

    def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            self._worker = None
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _ensure_worker(self, loop: asyncio.AbstractEventLoop) -> None:
        if self._worker is not None and not self._worker.done() and self._loop is loop:
            return
        # First use, or a new event loop (tests, a restarted server): start over on this loop.
        self._loop = loop
        self._arrived = asyncio.Event()
        self._pending = [entry for entry in self._pending if entry[1].get_loop() is loop]
        self._worker = loop.create_task(self._work(), name="answerbox-micro-batcher")

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if not self._pending:
                self._arrived.clear()
                await self._arrived.wait()
            await self._gather_more()
            round_, self._pending = self._pending, []
            live = [entry for entry in round_ if not entry[1].done()]  # drop cancelled callers
            live.sort(key=lambda entry: len(entry[0]))
            for batch in partition([len(entry[0]) for entry in live], self._max_batch):
                # Callers may have given up while earlier batches of this round ran.
                chunk = [entry for entry in live[batch.start : batch.stop] if not entry[1].done()]
                if not chunk:
                    continue
                began = time.monotonic()
                self.stats.waits_s.extend(began - arrived for _, _, arrived in chunk)
                try:
                    results = await loop.run_in_executor(
                        self._executor, self._run_batch, [item for item, _, _ in chunk]
                    )
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # handed to this batch's callers, who raise it
                    for _, future, _ in chunk:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                self.stats.batches += 1
                self.stats.items += len(chunk)
                for (_, future, _), result in zip(chunk, results, strict=True):
                    if not future.done():
                        future.set_result(result)

    async def _gather_more(self) -> None:
        """Wait until a full batch is pending or the oldest item has waited ``max_wait_s``."""
        while len(self._pending) < self._max_batch:
            remaining = self._pending[0][2] + self._max_wait_s - time.monotonic()
            if remaining <= 0:
                return
            self._arrived.clear()
            try:
                await asyncio.wait_for(self._arrived.wait(), remaining)
            except TimeoutError:
                return
