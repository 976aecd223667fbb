"""``GET /_answerbox/health``, ``/_answerbox/stats/search_pipeline`` and ``/metrics``.

Their statuses and totals are anyone's: a readiness probe or a scraper carries no credentials.
What names OpenSearch's address, the directories, the stored pipelines, the processors' tags or
the host is shown only to a caller OpenSearch lets monitor the cluster, as its security plugin
shows its own node stats only with a ``cluster:monitor`` right: answerbox asks OpenSearch for
``GET /_cluster/health`` (``cluster:monitor/health``) with the caller's credentials. Without
that plugin OpenSearch answers everyone, and answerbox shows everything to everyone.
"""

from __future__ import annotations

import asyncio

from opensearchpy import AsyncOpenSearch
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.requests import Request
from starlette.responses import Response

from answerbox.core.digest import json_digest
from answerbox.core.errors import AnswerboxError
from answerbox.core.ttl_cache import TTLCache
from answerbox.doctor import Doctor, health_body
from answerbox.http.rendering import OpenSearchJSON
from answerbox.opensearch import Caller, translate
from answerbox.pipeline.run.stats import PipelineStats

__all__ = ["Monitoring"]

# Refusals are kept too, a short while: a probe every few seconds asks OpenSearch (and fills its
# log with a 401) once per period, not once a call.
_VERDICT_S = 10.0
_MAX_VERDICTS = 4096  # keyed by credentials callers send: bounded, so invented ones cannot grow memory
# The liveness probe asks for the stats (deploy/k8s): an OpenSearch that hangs must not stall it.
_ASK_S = 1.0


class Monitoring:
    def __init__(self, *, doctor: Doctor, stats: PipelineStats, client: AsyncOpenSearch) -> None:
        self._doctor = doctor
        self._stats = stats
        self._client = client  # carries no credentials of its own: the caller's go with each call
        self._verdicts: TTLCache[bool] = TTLCache(_MAX_VERDICTS, _VERDICT_S)

    async def health(self, request: Request) -> Response:
        found, details = await asyncio.gather(self._doctor.examine(), self._may_monitor(request))
        body, status = health_body(found, details=details)
        return OpenSearchJSON(body, status_code=status)

    async def stats(self, request: Request) -> Response:
        stats = self._stats
        return OpenSearchJSON(stats.snapshot() if await self._may_monitor(request) else stats.summary())

    async def metrics(self, request: Request) -> Response:
        stats = self._stats
        registry = stats.registry if await self._may_monitor(request) else stats.summary_registry
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    async def _may_monitor(self, request: Request) -> bool:
        """Whether OpenSearch lets the caller monitor the cluster (it is asked with the caller's
        credentials, the answer kept a while per caller): any user it merely authenticates is not
        enough. No answer from it in time counts as no."""
        caller = Caller.from_headers(request.headers)
        key = json_digest(caller.credentials)
        verdict = self._verdicts.get(key)
        if verdict is None:
            try:
                await asyncio.wait_for(translate(self._client.cluster.health(headers=caller.as_dict())), _ASK_S)
            except (AnswerboxError, TimeoutError):
                verdict = False
            else:
                verdict = True
            self._verdicts.put(key, verdict)
        return verdict
