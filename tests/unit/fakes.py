"""Stand-ins for what the unit layer never reaches: OpenSearch, seen through the one seam
processors search by (``SearchBackend``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from answerbox.opensearch import JSON, Caller, SearchBackend
from answerbox.pipeline.base import PipelineContext
from answerbox.pipeline.deadline import Deadline
from answerbox.pipeline.scope import ScopedSearch, SearchScope


@dataclass(frozen=True)
class BackendCall:
    method: str  # "search" | "msearch"
    index: str | None
    body: Any  # search: the body; msearch: the (header, body) pairs
    params: dict[str, str]
    caller: Caller
    pipeline: JSON | None


class RecordingBackend(SearchBackend):
    """Records every search and answers each with no hits."""

    def __init__(self) -> None:  # no client: nothing is sent anywhere
        self.calls: list[BackendCall] = []

    async def search(
        self, *, index: str | None, body: JSON, params: Mapping[str, str], caller: Caller, pipeline: JSON | None = None
    ) -> JSON:
        self.calls.append(BackendCall("search", index, body, dict(params), caller, pipeline))
        return {"hits": {"total": {"value": 0, "relation": "eq"}, "hits": []}}

    async def msearch(
        self,
        *,
        searches: Sequence[tuple[JSON, JSON]],
        params: Mapping[str, str],
        caller: Caller,
        pipeline: JSON | None = None,
        inline: bool = True,
    ) -> JSON:
        self.calls.append(BackendCall("msearch", None, list(searches), dict(params), caller, pipeline))
        return {"responses": [{"hits": {"hits": []}} for _ in searches]}


def scoped_search(
    backend: SearchBackend | None = None, *, index: str | None = "docs", body: JSON | None = None
) -> ScopedSearch:
    scope = SearchScope.of(caller=Caller(), index=index, body=body or {}, params={}, native=None)
    return ScopedSearch(backend or RecordingBackend(), scope)


class FakeClock:
    """A clock that moves only when told: shares of time come out exact."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def pipeline_context(clock: FakeClock | None = None, **overrides: Any) -> PipelineContext:
    """A run's context searching through a ``RecordingBackend``, its time on ``clock`` (a new
    fake one by default)."""
    overrides.setdefault("search", scoped_search())
    overrides.setdefault("deadline", Deadline(clock or FakeClock()))
    return PipelineContext(
        pipeline_id=overrides.pop("pipeline_id", "test"), question=overrides.pop("question", None), **overrides
    )
