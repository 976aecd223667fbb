"""Pipeline definitions kept in an OpenSearch index, so every answerbox replica shares them
and they survive restarts. Reads are cached for a few seconds per replica.

Who may manage pipelines is OpenSearch's decision, not answerbox's: ``put``, ``list`` and
``delete`` (the pipeline API) run with the caller's own credentials against the index, so
its security plugin grants or refuses them as for any index. Only ``get``, which resolves a
pipeline for a search, uses the service account (a caller may run a pipeline it cannot read).
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from opensearchpy import AsyncOpenSearch

from answerbox.core.errors import ConfigError, UpstreamError
from answerbox.core.ttl_cache import TTLCache
from answerbox.core.wildcards import simple_match
from answerbox.opensearch import Caller, ensure_index, translate
from answerbox.pipeline.catalogue.definition import PipelineDefinition

__all__ = ["PipelineStore"]

logger = logging.getLogger(__name__)

_MAX_CACHED = 4096
# How long a replica trusts that an id has no pipeline: a new pipeline reaches every replica within it.
# Short, because re-reading a miss is one 404 by id a second per id, while a found pipeline (read
# by every search of it) keeps the whole cache_s.
_MISS_CACHE_S = 1.0
_MAPPING = {"mappings": {"dynamic": False, "properties": {"definition": {"type": "object", "enabled": False}}}}


class PipelineStore:
    def __init__(self, *, service: AsyncOpenSearch, caller: AsyncOpenSearch, index: str, cache_s: float) -> None:
        self._client = service
        self._caller_client = caller
        self._index = index
        # Keyed by ids callers name, existing or not: bounded, so invented ids cannot grow memory.
        self._cache: TTLCache[tuple[PipelineDefinition | None]] = TTLCache(_MAX_CACHED, cache_s)
        self._misses: TTLCache[tuple[None]] = TTLCache(_MAX_CACHED, min(cache_s, _MISS_CACHE_S))

    async def check_writable(self, caller: Caller) -> None:
        """Raise OpenSearch's refusal unless ``caller`` may write pipelines, changing no pipeline: a
        pipeline is built (its templates compiled and rendered) only for a caller who may store it.
        Deleting an id no pipeline has asks for the same rights as writing one (``crud``) and
        answers 404 when granted. Before the index exists the answer may be only that it does not
        (a 404 no rights were judged for): the index is created, as the first ``put`` would, and
        the caller asked again, so that no caller writes through that gap (fail closed)."""
        missing = await self._unjudged(caller)
        if missing is None:
            return
        await ensure_index(self._client, self._index, _MAPPING)
        missing = await self._unjudged(caller)
        if missing is not None:
            raise missing  # still no index to judge rights on (deleted meanwhile): refused

    async def _unjudged(self, caller: Caller) -> UpstreamError | None:
        """None once OpenSearch let ``caller`` write the index (a refusal raises); the
        ``index_not_found`` answer where it judged nothing, the index being absent."""
        probe = f"_rights-probe-{uuid.uuid4().hex}"
        try:
            await translate(self._caller_client.delete(index=self._index, id=probe, headers=caller.as_dict()))
        except UpstreamError as exc:
            if exc.status != 404:
                raise
            return exc if "index_not_found" in str(exc.body) else None
        return None

    async def put(self, pipeline_id: str, definition: PipelineDefinition, caller: Caller) -> None:
        await ensure_index(self._client, self._index, _MAPPING)
        body = {"definition": definition.to_json()}
        await translate(
            self._caller_client.index(
                index=self._index, id=pipeline_id, body=body, params={"refresh": "true"}, headers=caller.as_dict()
            )
        )
        self._cache.put(pipeline_id, (definition,))
        self._misses.drop(pipeline_id)

    async def get(self, pipeline_id: str) -> PipelineDefinition | None:
        cached = self._cache.get(pipeline_id) or self._misses.get(pipeline_id)
        if cached is not None:
            return cached[0]
        try:
            doc = await translate(self._client.get(index=self._index, id=pipeline_id))
            definition = _parse(doc) if doc.get("found") else None
        except UpstreamError as exc:
            if exc.status != 404:
                raise
            definition = None
        if definition is None:
            self._misses.put(pipeline_id, (None,))
        else:
            self._cache.put(pipeline_id, (definition,))
        return definition

    async def list(self, caller: Caller, pattern: str = "*") -> dict[str, PipelineDefinition]:
        patterns = pattern.split(",")
        stored = await self._all(self._caller_client, caller)
        return {pid: definition for pid, definition in stored.items() if any(simple_match(p, pid) for p in patterns)}

    async def stored(self) -> dict[str, PipelineDefinition]:
        """Every stored pipeline, read with the service account: what a replica warms up as it starts."""
        return await self._all(self._client, Caller())

    async def _all(self, client: AsyncOpenSearch, caller: Caller) -> dict[str, PipelineDefinition]:
        try:
            result: dict[str, Any] = await translate(
                client.search(
                    index=self._index, body={"query": {"match_all": {}}, "size": 10000}, headers=caller.as_dict()
                )
            )
        except UpstreamError as exc:
            if exc.status == 404:
                return {}
            raise
        stored: dict[str, PipelineDefinition] = {}
        for hit in sorted(result["hits"]["hits"], key=lambda h: h["_id"]):
            try:
                stored[hit["_id"]] = _parse(hit)
            except ConfigError as exc:
                # One bad document must not hide every other pipeline from everyone: it is left
                # out here, and `answerbox doctor` (the health check's details) names it.
                logger.warning("stored pipeline %s is left out: %s", hit["_id"], exc.reason)
        return stored

    async def delete(self, pipeline_id: str, caller: Caller) -> bool:
        try:
            await translate(
                self._caller_client.delete(
                    index=self._index, id=pipeline_id, params={"refresh": "true"}, headers=caller.as_dict()
                )
            )
        except UpstreamError as exc:
            if exc.status != 404:
                raise
            return False
        finally:
            self._cache.drop(pipeline_id)
            self._misses.drop(pipeline_id)
        return True


def _parse(doc: dict[str, Any]) -> PipelineDefinition:
    """A stored document's pipeline; ConfigError where it holds none this version takes (a document
    written to the index past answerbox, or by a version with other options)."""
    source = doc.get("_source")
    return PipelineDefinition.parse(source.get("definition") if isinstance(source, dict) else None)
