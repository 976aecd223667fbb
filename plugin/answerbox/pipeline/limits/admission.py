"""Admission: how many pipeline runs answerbox takes on at once, in all and per caller.

A run holds an LLM call, model work and OpenSearch connections for seconds; taking on more
than the admin's ``limits.max_concurrent_runs`` only makes every search slower, so a search
past it is refused at once with OpenSearch's 429 ``rejected_execution_exception`` (what
OpenSearch answers when its search queue is full), which clients already retry. One caller
(one user, where the cluster has users; else one set of credentials) may hold at most
``limits.max_runs_per_caller`` of them, so a caller who floods is refused before the others
are; callers without credentials cannot be told apart, and only the global limit holds them.
Each _msearch line that runs a pipeline is one run; lines past the room left are refused one
by one (``room``), as OpenSearch refuses the lines past its full search queue.
An admitted run's LLM calls count against ``limits.max_llm_calls``, its prompts' rendering
against ``limits.render_budget_s`` of CPU, and its model work is queued under its caller's
name (the micro-batcher bounds each caller's share of its queue).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from answerbox.core.config import Limits
from answerbox.core.digest import json_digest
from answerbox.core.errors import RejectedExecution
from answerbox.core.work_owner import work_owner
from answerbox.identities import Identities
from answerbox.llm.call_slots import call_budget
from answerbox.opensearch import Caller
from answerbox.prompts.sandbox import request_render_budget

__all__ = ["Admission", "caller_key"]


async def caller_key(caller: Caller, identities: Identities) -> str | None:
    """Who a caller is, for sharing; None without credentials, when callers cannot be told
    apart and only the global limits apply. Where the cluster has users it is the user, so that
    a fresh session cookie or an extra header is not a new caller with shares of its own.

    OpenSearch is asked for every caller, credentials or not, before any processor runs: where
    its security plugin refuses the caller (a 401 without credentials), the run is refused
    before its request processors (LLM calls included) spend anything. Without that plugin the
    answer (no users) is kept a while, one request a minute."""
    user = await identities.user(caller)
    if not caller.credentials:
        return None
    return json_digest(["user", user] if user is not None else caller.credentials)[:16]


class Admission:
    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self._running = 0
        self._per_caller: Counter[str] = Counter()

    def room(self, key: str | None) -> int:
        """How many more runs the caller ``key`` names may start now: an _msearch takes as many
        of its pipeline lines as fit, and OpenSearch's per-line 429 answers the rest."""
        limits = self._limits
        left = limits.max_concurrent_runs - self._running
        if key is not None:
            left = min(left, limits.max_runs_per_caller - self._per_caller[key])
        return max(0, left)

    @contextmanager
    def admitted(self, key: str | None, runs: int = 1) -> Iterator[None]:
        """Hold ``runs`` runs (an _msearch's pipeline lines count one each, never fewer than
        run) for the caller ``key`` names (``caller_key``), or raise 429."""
        limits = self._limits
        runs = max(1, runs)
        if key is not None and self._per_caller[key] + runs > limits.max_runs_per_caller:
            raise RejectedExecution(
                f"rejected execution of search pipeline run: this caller has {self._per_caller[key]} running, "
                f"the limit is {limits.max_runs_per_caller} (limits.max_runs_per_caller)"
            )
        if self._running + runs > limits.max_concurrent_runs:
            raise RejectedExecution(
                f"rejected execution of search pipeline run: {self._running} running, "
                f"the limit is {limits.max_concurrent_runs} (limits.max_concurrent_runs)"
            )
        self._running += runs
        if key is not None:
            self._per_caller[key] += runs
        owner = work_owner.set(key)
        try:
            with call_budget(limits.max_llm_calls), request_render_budget(limits.render_budget_s):
                yield
        finally:
            work_owner.reset(owner)
            self._running -= runs
            if key is not None:
                self._per_caller[key] -= runs
                if not self._per_caller[key]:
                    del self._per_caller[key]
