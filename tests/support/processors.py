"""Small processors registered only in tests, to drive the engine itself."""

from __future__ import annotations

from typing import Any

from answerbox.pipeline.base import JSON, PipelineContext, ProcessorConfig, RequestProcessor, ResponseProcessor, SearchRequest
from answerbox.pipeline.registry import ProcessorRegistry
from answerbox.processors import default_registry


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
    type_name = "explode"
    config_model = ProcessorConfig

    async def process_response(self, request: SearchRequest, response: JSON, ctx: PipelineContext) -> Any:
        raise RuntimeError("boom")


def registry_with_test_processors() -> ProcessorRegistry:
    registry = default_registry()
    for cls in (OnlyTitle, LabelHits, Explode):
        registry.register(cls)
    return registry
