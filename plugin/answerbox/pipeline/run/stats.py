"""Pipeline and processor counters, in the shape of OpenSearch's ``_nodes/stats/search_pipeline``,
mirrored as Prometheus metrics.

Two views, as OpenSearch with its security plugin shows its node stats only to callers it
authenticates: ``snapshot`` and ``registry`` name the stored pipelines, the processors' tags and
the host, for such callers; ``summary`` and ``summary_registry`` hold the totals (processors by
type), for anyone (a probe, a scraper without credentials).
"""

from __future__ import annotations

import secrets
import socket
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any, Literal

from prometheus_client import CollectorRegistry, Counter, Histogram

from answerbox import __version__
from answerbox.core.contract import CONTRACT_VERSION

__all__ = ["Phase", "PipelineStats"]

Phase = Literal["request", "response"]
_MAX_NAMES = 64  # distinct processor names kept per pipeline and phase


@dataclass
class _Counter:
    count: int = 0
    time_in_millis: float = 0.0
    current: int = 0
    failed: int = 0

    def as_json(self) -> dict[str, int]:
        return {**asdict(self), "time_in_millis": round(self.time_in_millis)}


@dataclass
class _ProcessorStats:
    type: str
    stats: _Counter


def _metrics(
    registry: CollectorRegistry, pipeline: list[str], processor: list[str]
) -> tuple[Counter, Counter, Histogram]:
    """Phase runs by ``pipeline`` labels, processor failures and latency by ``processor`` labels."""
    return (
        Counter("answerbox_pipeline_runs", "Pipeline phase runs", [*pipeline, "phase"], registry=registry),
        Counter("answerbox_processor_failures", "Processor failures", [*processor, "ignored"], registry=registry),
        Histogram("answerbox_processor_seconds", "Processor latency", processor, registry=registry),
    )


class PipelineStats:
    def __init__(self) -> None:
        # Random, as OpenSearch's node ids are: the id is in both views, the host only in the full one.
        self.node_id = secrets.token_urlsafe(16)
        self._host = socket.gethostname()
        self._total: dict[Phase, _Counter] = {"request": _Counter(), "response": _Counter()}
        self._pipelines: dict[str, dict[Phase, _Counter]] = defaultdict(
            lambda: {"request": _Counter(), "response": _Counter()}
        )
        self._processors: dict[str, dict[Phase, dict[str, _ProcessorStats]]] = defaultdict(
            lambda: {"request": {}, "response": {}}
        )
        # One registry per app, so several apps (tests) never collide on metric names.
        self.registry = CollectorRegistry()
        self._runs, self._failures, self._latency = _metrics(self.registry, ["pipeline"], ["pipeline", "processor"])
        # The same, summed over pipelines, processors by type: what no credentials are needed for.
        self.summary_registry = CollectorRegistry()
        self._summary_runs, self._summary_failures, self._summary_latency = _metrics(
            self.summary_registry, [], ["type"]
        )

    def start(self, pipeline: str, phase: Phase) -> None:
        self._total[phase].current += 1
        self._pipelines[pipeline][phase].current += 1

    def finish(self, pipeline: str, phase: Phase, millis: float, failed: bool) -> None:
        self._runs.labels(pipeline, phase).inc()
        self._summary_runs.labels(phase).inc()
        for counter in (self._total[phase], self._pipelines[pipeline][phase]):
            counter.current -= 1
            counter.count += 1
            counter.time_in_millis += millis
            counter.failed += int(failed)

    def processor(
        self, pipeline: str, phase: Phase, name: str, type_name: str, millis: float, failed: bool, ignored: bool
    ) -> None:
        known = self._processors[pipeline][phase]
        if name not in known and len(known) >= _MAX_NAMES:
            # Tags of a search's own pipeline are the caller's to choose: past the bound they
            # share one entry (and one metric label) per type instead of growing without end.
            name = f"{type_name}:other"
        entry = known.setdefault(name, _ProcessorStats(type_name, _Counter()))
        entry.stats.count += 1
        entry.stats.time_in_millis += millis
        entry.stats.failed += int(failed)
        self._latency.labels(pipeline, name).observe(millis / 1000)
        self._summary_latency.labels(type_name).observe(millis / 1000)
        if failed:
            self._failures.labels(pipeline, name, str(ignored).lower()).inc()
            self._summary_failures.labels(type_name, str(ignored).lower()).inc()

    def snapshot(self) -> dict[str, Any]:
        """Everything: each pipeline and processor by id and tag, and the host."""
        pipelines = {
            pid: {
                "request": phases["request"].as_json(),
                "response": phases["response"].as_json(),
                "request_processors": self._processor_list(pid, "request"),
                "response_processors": self._processor_list(pid, "response"),
            }
            for pid, phases in self._pipelines.items()
        }
        return self._nodes({"name": self._host, "host": self._host}, {"pipelines": pipelines})

    def summary(self) -> dict[str, Any]:
        """The totals alone: no pipeline id, processor tag or host."""
        return self._nodes({}, {})

    def _nodes(self, node: dict[str, Any], search_pipeline: dict[str, Any]) -> dict[str, Any]:
        body = {
            **node,
            "answerbox": {"version": __version__, "contract_version": CONTRACT_VERSION},
            "search_pipeline": {
                "total_request": self._total["request"].as_json(),
                "total_response": self._total["response"].as_json(),
                **search_pipeline,
            },
        }
        return {"_nodes": {"total": 1, "successful": 1, "failed": 0}, "nodes": {self.node_id: body}}

    def _processor_list(self, pipeline: str, phase: Phase) -> list[dict[str, Any]]:
        return [
            {name: {"type": entry.type, "stats": entry.stats.as_json()}}
            for name, entry in self._processors[pipeline][phase].items()
        ]
