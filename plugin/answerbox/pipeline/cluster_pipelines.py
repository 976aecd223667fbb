"""The search pipelines OpenSearch itself holds, beside answerbox's own.

A search that names an id answerbox does not store is left to OpenSearch, which runs its own
pipeline of that id (``resolver.py``). The pipeline API does the same: ``GET`` lists the cluster's
pipelines beside answerbox's (answerbox's shadowing one of the same id, as for a search), and
``DELETE`` of an id answerbox does not store deletes the cluster's. Both run with the caller's own
credentials, so OpenSearch decides what the caller may see or delete.
"""

from __future__ import annotations

from typing import Any

from opensearchpy import AsyncOpenSearch

from answerbox.core.errors import UpstreamError, UpstreamUnavailable
from answerbox.opensearch import JSON, Caller, translate

__all__ = ["ClusterPipelines"]


class ClusterPipelines:
    def __init__(self, caller_client: AsyncOpenSearch) -> None:
        self._client = caller_client

    async def get(self, pattern: str, caller: Caller) -> JSON:
        """The cluster's pipelines ``pattern`` names, as OpenSearch answers ``GET``; none where it
        has none, or does not tell this caller (a refusal shows less, never more)."""
        try:
            found: Any = await translate(self._client.search_pipeline.get(id=pattern, headers=caller.as_dict()))
        except (UpstreamError, UpstreamUnavailable):
            return {}
        return found if isinstance(found, dict) else {}

    async def delete(self, pipeline_id: str, caller: Caller) -> bool:
        """Delete the cluster's pipeline ``pipeline_id``; False where it has none (or no pipeline
        API: 400). Any other refusal is the caller's to see."""
        try:
            await translate(self._client.search_pipeline.delete(id=pipeline_id, headers=caller.as_dict()))
        except UpstreamError as exc:
            if exc.status in (400, 404):
                return False
            raise
        return True
