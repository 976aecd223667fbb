"""How many LLM calls run at once, and how many one search may make.

An LLM endpoint serves a few calls at a time; the rest queue inside it, where a slow one
holds every search behind it. So answerbox admits at most ``llm.max_concurrent`` calls and a
call waits for a slot only as long as its own timeout allows: past that it fails as a
timeout, and its processor degrades as for any LLM timeout. One search (one ``_search``, one
``_msearch`` with all its lines, one stream) may make at most ``limits.max_llm_calls``
calls, so a single request cannot ask for thousands.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar

from answerbox.core.errors import LLMError, LLMTimeout
from answerbox.core.work_owner import work_owner

__all__ = ["LLMSlots", "call_budget"]


class _CallBudget:
    def __init__(self, calls: int) -> None:
        self.left = calls
        self.calls = calls

    def spend(self) -> None:
        if self.left <= 0:
            raise LLMError(f"this search has made its {self.calls} LLM calls (limits.max_llm_calls)")
        self.left -= 1


# The running request's budget: tasks a request starts (its _msearch lines) share it.
_BUDGET: ContextVar[_CallBudget | None] = ContextVar("llm_call_budget", default=None)


@contextmanager
def call_budget(calls: int) -> Iterator[None]:
    """Every LLM call made inside (by this task and the tasks it starts) counts against ``calls``."""
    token = _BUDGET.set(_CallBudget(calls))
    try:
        yield
    finally:
        _BUDGET.reset(token)


class LLMSlots:
    """``concurrent`` calls at once, and at most ``per_caller`` of them for one caller
    (``work_owner``), so a caller who floods leaves slots for the others."""

    def __init__(self, concurrent: int, per_caller: int) -> None:
        self._slots = asyncio.Semaphore(concurrent)
        self._per_owner = min(per_caller, concurrent)
        self._owners: dict[str, asyncio.Semaphore] = {}
        self._waiting: Counter[str] = Counter()  # calls of each owner holding or awaiting its gate

    @asynccontextmanager
    async def admitted(self, timeout_s: float) -> AsyncIterator[float]:
        """Hold a slot for one call; yields the seconds of ``timeout_s`` left once admitted."""
        budget = _BUDGET.get()
        if budget is not None:
            budget.spend()
        # Callers without credentials cannot be told apart: the global slots alone bound them.
        owner = work_owner.get()
        gates = [self._slots] if owner is None else [self._owner_gate(owner), self._slots]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        held: list[asyncio.Semaphore] = []
        try:
            try:
                async with asyncio.timeout_at(deadline):
                    for gate in gates:
                        await gate.acquire()
                        held.append(gate)
            except TimeoutError:
                raise LLMTimeout(f"the LLM was busy with other searches for {timeout_s:g}s") from None
            yield max(deadline - loop.time(), 0.001)
        finally:
            for gate in held:
                gate.release()
            if owner is not None:
                self._waiting[owner] -= 1
                if not self._waiting[owner]:
                    del self._waiting[owner], self._owners[owner]

    def _owner_gate(self, owner: str) -> asyncio.Semaphore:
        self._waiting[owner] += 1  # released in admitted's finally: the gate lives while in use
        return self._owners.setdefault(owner, asyncio.Semaphore(self._per_owner))
