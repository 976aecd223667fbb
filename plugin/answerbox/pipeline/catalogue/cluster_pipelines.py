"""The search pipelines OpenSearch itself holds, beside answerbox's own.

A search that names an id answerbox does not store is left to OpenSearch, which runs its own
pipeline of that id (``resolver.py``). The pipeline API does the same: ``GET`` lists the cluster's
pipelines beside answerbox's (answerbox's shadowing one of the same id, as for a search), and
``DELETE`` of an id answerbox does not store deletes the cluster's. ``PUT`` of an id the cluster
holds replaces the cluster's pipeline for every search of it, so it needs the right to put the
cluster's pipelines too (``check_not_shadowed``). All run with the caller's own credentials, so
OpenSearch decides what the caller may see, replace or delete.
"""

from __future__ import annotations

from typing import Any

from opensearchpy import AsyncOpenSearch

from answerbox.core.errors import AnswerboxError, UpstreamError, UpstreamUnavailable
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

    async def check_not_shadowed(self, pipeline_id: str, caller: Caller) -> None:
        """Raise 403 where the cluster holds a search pipeline ``pipeline_id`` and ``caller`` may not
        put the cluster's pipelines: answerbox's would run in its place for every search naming it
        or defaulting to it (an index default with a ``filter_query``, say). Where OpenSearch will
        not tell the caller whether it holds one, refused too (fail closed)."""
        try:
            found: Any = await translate(self._client.search_pipeline.get(id=pipeline_id, headers=caller.as_dict()))
        except UpstreamError as exc:
            if exc.status in (400, 404):
                return  # none of that id, or no pipeline API (OpenSearch before 2.9)
            if exc.status == 403:
                raise _shadowing(pipeline_id, "may not read the cluster's search pipelines") from exc
            raise
        held = found.get(pipeline_id) if isinstance(found, dict) else None
        if not isinstance(held, dict):
            return
        try:
            # The cluster's own definition written back: OpenSearch judges the right to put its
            # pipelines, and the pipeline stays as it was.
            await translate(self._client.search_pipeline.put(id=pipeline_id, body=held, headers=caller.as_dict()))
        except UpstreamError as exc:
            if exc.status == 403:
                raise _shadowing(pipeline_id, "may not put the cluster's search pipelines") from exc
            raise


def _shadowing(pipeline_id: str, why: str) -> AnswerboxError:
    return AnswerboxError(
        f"pipeline [{pipeline_id}] would shadow the cluster's search pipeline of the same id for every search "
        f"of it, and this caller {why} (cluster:admin/search/pipeline/get and put)",
        status=403,
        error_type="security_exception",
    )
