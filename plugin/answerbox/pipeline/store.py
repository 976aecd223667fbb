"""Pipeline definitions kept in an OpenSearch index, so every answerbox replica shares them
and they survive restarts. Reads are cached for a few seconds per replica."""

from __future__ import annotations

import fnmatch
import time
from typing import Any

from opensearchpy import AsyncOpenSearch, NotFoundError

from answerbox.errors import UpstreamError
from answerbox.opensearch import ensure_index, translate
from answerbox.pipeline.definition import PipelineDefinition

__all__ = ["PipelineStore"]

_MAPPING = {"mappings": {"dynamic": False, "properties": {"definition": {"type": "object", "enabled": False}}}}


class PipelineStore:
    def __init__(self, client: AsyncOpenSearch, index: str, cache_s: float) -> None:
        self._client = client
        self._index = index
        self._cache_s = cache_s
        self._cache: dict[str, tuple[float, PipelineDefinition | None]] = {}

    async def put(self, pipeline_id: str, definition: PipelineDefinition) -> None:
        await ensure_index(self._client, self._index, _MAPPING)
        await translate(
            self._client.index(index=self._index, id=pipeline_id, body={"definition": definition.to_json()}, params={"refresh": "true"})
        )
        self._cache[pipeline_id] = (time.monotonic(), definition)

    async def get(self, pipeline_id: str) -> PipelineDefinition | None:
        cached = self._cache.get(pipeline_id)
        if cached and time.monotonic() - cached[0] < self._cache_s:
            return cached[1]
        try:
            doc = await translate(self._client.get(index=self._index, id=pipeline_id))
            definition = PipelineDefinition.parse(doc["_source"]["definition"]) if doc.get("found") else None
        except UpstreamError as exc:
            if exc.status != 404:
                raise
            definition = None
        self._cache[pipeline_id] = (time.monotonic(), definition)
        return definition

    async def list(self, pattern: str = "*") -> dict[str, PipelineDefinition]:
        try:
            result: dict[str, Any] = await translate(
                self._client.search(index=self._index, body={"query": {"match_all": {}}, "size": 10000})
            )
        except UpstreamError as exc:
            if exc.status == 404:
                return {}
            raise
        patterns = pattern.split(",")
        return {
            hit["_id"]: PipelineDefinition.parse(hit["_source"]["definition"])
            for hit in sorted(result["hits"]["hits"], key=lambda h: h["_id"])
            if any(fnmatch.fnmatchcase(hit["_id"], p) for p in patterns)
        }

    async def delete(self, pipeline_id: str) -> bool:
        self._cache.pop(pipeline_id, None)
        try:
            await self._client.delete(index=self._index, id=pipeline_id, params={"refresh": "true"})
        except NotFoundError:
            return False
        return True
