"""The search-pipeline API as OpenSearch defines it: ``PUT/GET/DELETE /_search/pipeline/{id}``.
``GET`` and ``DELETE`` reach the cluster's own pipelines too (``pipeline/catalogue/cluster_pipelines.py``)."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from answerbox.core.config import Limits
from answerbox.core.errors import ResourceNotFound
from answerbox.http.bodies import parsed, read_decoded, require_json
from answerbox.http.rendering import OpenSearchJSON
from answerbox.opensearch import Caller
from answerbox.pipeline.catalogue.cluster_pipelines import ClusterPipelines
from answerbox.pipeline.catalogue.definition import PipelineDefinition, validate_pipeline_id
from answerbox.pipeline.catalogue.resolver import PipelineResolver
from answerbox.pipeline.catalogue.store import PipelineStore
from answerbox.pipeline.run.plan import plan_of

__all__ = ["PipelineAPI"]


class PipelineAPI:
    def __init__(
        self, *, store: PipelineStore, cluster: ClusterPipelines, resolver: PipelineResolver, limits: Limits
    ) -> None:
        self._store = store
        self._cluster = cluster
        self._resolver = resolver
        self._limits = limits

    async def put(self, request: Request) -> Response:
        pipeline_id = validate_pipeline_id(request.path_params["id"])
        require_json(request)
        data: Any = await parsed(await read_decoded(request, self._limits))
        definition = PipelineDefinition.parse(data)
        caller = Caller.from_headers(request.headers)
        await self._store.check_writable(caller)
        await self._cluster.check_not_shadowed(pipeline_id, caller)
        # Building validates every processor config before anything is stored.
        pipeline = await self._resolver.build(pipeline_id, definition)
        await self._store.put(pipeline_id, definition, caller)
        await pipeline.warm_up()
        return OpenSearchJSON({"acknowledged": True})

    async def get(self, request: Request) -> Response:
        """OpenSearch's answer, the cluster's own pipelines beside answerbox's (which shadow one of
        the same id, as for a search); with ``?explain``, each of answerbox's pipelines' definition
        beside its run plan (``pipeline/run/plan.py``): the values a search through it goes by, and
        where each came from."""
        pattern = request.path_params.get("id", "*")
        caller = Caller.from_headers(request.headers)
        found, cluster = await asyncio.gather(self._store.list(caller, pattern), self._cluster.get(pattern, caller))
        if not found and not cluster and "*" not in pattern:
            # OpenSearch answers a missing pipeline with an empty object and 404.
            return OpenSearchJSON({}, status_code=404)
        if "explain" not in request.query_params:
            return OpenSearchJSON(cluster | {pid: definition.to_json() for pid, definition in found.items()})
        explained = {}
        for pid, definition in found.items():
            plan = (await plan_of(await self._resolver.build(pid, definition), None, self._limits)).plan
            explained[pid] = {"pipeline": definition.to_json(), "plan": plan.model_dump()}
        return OpenSearchJSON(explained)

    async def delete(self, request: Request) -> Response:
        pipeline_id = request.path_params["id"]
        caller = Caller.from_headers(request.headers)
        # An id answerbox does not store may be the cluster's, as for a search.
        if not await self._store.delete(pipeline_id, caller) and not await self._cluster.delete(pipeline_id, caller):
            raise ResourceNotFound(f"pipeline [{pipeline_id}] is missing")
        return OpenSearchJSON({"acknowledged": True})
