"""Small processors registered only in tests, to drive the engine itself."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, ClassVar

from answerbox.pipeline.base import (
    JSON,
    PipelineContext,
    ProcessorConfig,
    RequestProcessor,
    ResponseProcessor,
    SearchRequest,
)
from answerbox.pipeline.catalogue.registry import ProcessorRegistry
from answerbox.processors.registry import default_registry

# What the pipeline-selection tests index and search, with pipelines of these processors.
DOCS = [
    {"_id": "1", "title": "dune", "body": "spice on a desert planet"},
    {"_id": "2", "title": "emma", "body": "a desert of manners and spice"},
    {"_id": "3", "title": "ulysses", "body": "one day in dublin"},
]
FILTER_DUNE = {"request_processors": [{"only_title": {"title": "dune"}}]}
LABEL = {"response_processors": [{"label_hits": {"tag": "lab", "label": "seen"}}]}
QUERY = {"query": {"match": {"body": "desert spice"}}}


class OnlyTitleConfig(ProcessorConfig):
    title: str


class OnlyTitle(RequestProcessor[OnlyTitleConfig]):
    """Adds a term filter on ``title``: shows a request processor changing the search."""

    type_name = "only_title"
    config_model = OnlyTitleConfig

    async def process_request(self, request: SearchRequest, ctx: PipelineContext) -> SearchRequest:
        changed = request.copy()
        query = changed.body.get("query", {"match_all": {}})
        changed.body["query"] = {"bool": {"must": [query], "filter": [{"term": {"title": self.config.title}}]}}
        return changed


class RecordRequest(RequestProcessor[ProcessorConfig]):
    """Records each search it runs for (its question): a request processor that checks nothing
    with OpenSearch before it spends (as a custom one, or an LLM call, may)."""

    type_name = "record_request"
    config_model = ProcessorConfig
    ran: ClassVar[list[str | None]] = []

    async def process_request(self, request: SearchRequest, ctx: PipelineContext) -> SearchRequest:
        RecordRequest.ran.append(ctx.question)
        return request


class LabelConfig(ProcessorConfig):
    label: str


class LabelHits(ResponseProcessor[LabelConfig]):
    """Writes a label into every hit and a warning into the report."""

    type_name = "label_hits"
    config_model = LabelConfig

    async def process_response(self, request: SearchRequest, response: JSON, ctx: PipelineContext) -> JSON:
        for hit in response["hits"]["hits"]:
            hit.setdefault("fields", {})["label"] = [self.config.label]
        ctx.report.warn(f"labelled {len(response['hits']['hits'])} hits for question {ctx.question!r}")
        return response


class Explode(ResponseProcessor[ProcessorConfig]):
    """Fails with text no caller may read (a path and a host, as a library's error carries)."""

    type_name = "explode"
    config_model = ProcessorConfig
    secret = "boom at /srv/answerbox/keys/service.pem via 10.0.0.7:9200"

    async def process_response(self, request: SearchRequest, response: JSON, ctx: PipelineContext) -> Any:
        raise RuntimeError(Explode.secret)


class SleepConfig(ProcessorConfig):
    seconds: float = 0.0


class Sleep(ResponseProcessor[SleepConfig]):
    """Sleeps, after telling the report how much time it was given; records being cancelled."""

    type_name = "sleep"
    config_model = SleepConfig
    cancelled: ClassVar[list[str]] = []

    async def process_response(self, request: SearchRequest, response: JSON, ctx: PipelineContext) -> JSON:
        ctx.report.warn(f"{self.name} had {ctx.deadline.left():.2f}s")
        try:
            await asyncio.sleep(self.config.seconds)
        except asyncio.CancelledError:
            Sleep.cancelled.append(self.name)
            raise
        return response


class SlowWarmUp(ResponseProcessor[ProcessorConfig]):
    """Warms up until the test opens ``gate`` (a model that takes its time to load); reports how
    much of the search's time had gone by when it ran."""

    type_name = "slow_warm_up"
    config_model = ProcessorConfig
    gate: ClassVar[threading.Event] = threading.Event()

    async def warm_up(self) -> None:
        await asyncio.to_thread(SlowWarmUp.gate.wait, 60)

    async def process_response(self, request: SearchRequest, response: JSON, ctx: PipelineContext) -> JSON:
        ctx.report.warn(f"ran {ctx.deadline.elapsed_s():.3f}s into the search, with {ctx.deadline.left():.3f}s left")
        return response


def registry_with_test_processors() -> ProcessorRegistry:
    registry = default_registry()
    for cls in (OnlyTitle, RecordRequest, LabelHits, Explode, Sleep, SlowWarmUp):
        registry.register(cls)
    return registry
