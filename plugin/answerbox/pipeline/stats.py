"""Pipeline and processor counters, in the shape of OpenSearch's ``_nodes/stats/search_pipeline``,
mirrored as Prometheus metrics."""

from __future__ import annotations

import socket
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Literal

from prometheus_client import CollectorRegistry, Counter, Histogram

from answerbox import __version__
from answerbox.contract import CONTRACT_VERSION

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
        return {
            "count": self.count,
            "time_in_millis": round(self.time_in_millis),
            "current": self.current,
            "failed": self.failed,
        }


@dataclass
class _ProcessorStats:
    type: str
    stats: _Counter


class PipelineStats:
    def __init__(self) -> None:
        self.node_id = socket.gethostname()
        self._total: dict[Phase, _Counter] = {"request": _Counter(), "response": _Counter()}
        self._pipelines: dict[str, dict[Phase, _Counter]] = defaultdict(
            lambda: {"request": _Counter(), "response": _Counter()}
        )
        self._processors: dict[str, dict[Phase, dict[str, _ProcessorStats]]] = defaultdict(
            lambda: {"request": {}, "response": {}}
        )
        # One registry per app, so several apps (tests) never collide on metric names.
        self.registry = CollectorRegistry()
        self._runs = Counter(
            "answerbox_pipeline_runs", "Pipeline phase runs", ["pipeline", "phase"], registry=self.registry
        )
        self._failures = Counter(
            "answerbox_processor_failures",
            "Processor failures",
            ["pipeline", "processor", "ignored"],
            registry=self.registry,
        )
        self._latency = Histogram(
            "answerbox_processor_seconds", "Processor latency", ["pipeline", "processor"], registry=self.registry
        )

    def start(self, pipeline: str, phase: Phase) -> None:
        self._total[phase].current += 1
        self._pipelines[pipeline][phase].current += 1

    def finish(self, pipeline: str, phase: Phase, millis: float, failed: bool) -> None:
        self._runs.labels(pipeline, phase).inc()
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
        if failed:
            self._failures.labels(pipeline, name, str(ignored).lower()).inc()

    def snapshot(self) -> dict[str, Any]:
        pipelines = {
            pid: {
                "request": phases["request"].as_json(),
                "response": phases["response"].as_json(),
                "request_processors": self._processor_list(pid, "request"),
                "response_processors": self._processor_list(pid, "response"),
            }
            for pid, phases in self._pipelines.items()
        }
        node = {
            "answerbox": {"version": __version__, "contract_version": CONTRACT_VERSION},
            "search_pipeline": {
                "total_request": self._total["request"].as_json(),
                "total_response": self._total["response"].as_json(),
                "pipelines": pipelines,
            },
        }
        return {"_nodes": {"total": 1, "successful": 1, "failed": 0}, "nodes": {self.node_id: node}}

    def _processor_list(self, pipeline: str, phase: Phase) -> list[dict[str, Any]]:
        return [
            {name: {"type": entry.type, "stats": entry.stats.as_json()}}
            for name, entry in self._processors[pipeline][phase].items()
        ]
