"""How long a server in this process leaves a cheap request waiting while it does something
else: a thread asks for ``/_answerbox/stats/search_pipeline`` over and over and keeps the
longest wait. One C call that holds the interpreter lock, or a loop that never yields,
shows as a long wait. The test process's own heap is frozen out of the collector meanwhile: the
server runs in that process, and a full collection of a long test session's objects holds the
lock for a few tenths of a second that no request of the server's caused."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

__all__ = ["Lag", "frozen_heap", "lag_of"]


class Lag:
    def __init__(self) -> None:
        self.longest_s = 0.0
        self.polls = 0


@contextmanager
def frozen_heap() -> Iterator[None]:
    """The test process's objects so far out of the collector while timed work runs: a full
    collection of a long test session's heap pauses this process for tenths of a second, which
    a client's or a server's timings here would count as the server's."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextmanager
def lag_of(url: str, *, every_s: float = 0.02) -> Iterator[Lag]:
    lag, stop = Lag(), threading.Event()

    def poll() -> None:
        with httpx.Client(timeout=30) as http:
            while not stop.is_set():
                started = time.monotonic()
                assert http.get(f"{url}/_answerbox/stats/search_pipeline").status_code == 200
                lag.longest_s = max(lag.longest_s, time.monotonic() - started)
                lag.polls += 1
                stop.wait(every_s)

    with frozen_heap():
        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        time.sleep(0.2)  # the poller's connection is open before the work starts
        try:
            yield lag
        finally:
            stop.set()
            poller.join()
