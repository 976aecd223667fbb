"""Which pipeline a search runs, chosen as OpenSearch chooses it:

1. an inline (temporary) pipeline object in the body's ``search_pipeline``;
2. a pipeline id in the body's ``search_pipeline`` or the ``search_pipeline`` parameter;
3. the target index's ``index.search.default_pipeline`` setting (cached briefly).

``_none`` disables the default. An id answerbox does not store is left to OpenSearch,
which may define it natively or answers that it is not defined.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeGuard

from opensearchpy import AsyncOpenSearch

from answerbox.core.errors import InvalidRequest, UpstreamError
from answerbox.core.ttl_cache import TTLCache
from answerbox.opensearch import translate
from answerbox.pipeline.catalogue.definition import AD_HOC_PIPELINE_ID, PipelineDefinition
from answerbox.pipeline.catalogue.registry import ProcessorRegistry
from answerbox.pipeline.catalogue.store import PipelineStore
from answerbox.pipeline.run.pipeline import Pipeline
from answerbox.pipeline.run.stats import PipelineStats

if TYPE_CHECKING:
    from answerbox.services import Services

__all__ = ["PipelineResolver"]

_MAX_CACHED = 4096
_DEFAULT_SETTING = "index.search.default_pipeline"


class PipelineResolver:
    def __init__(
        self,
        *,
        store: PipelineStore,
        registry: ProcessorRegistry,
        services: Services,
        stats: PipelineStats,
        settings_client: AsyncOpenSearch,
        cache_s: float,
    ) -> None:
        self._store = store
        self._registry = registry
        self._services = services
        self._stats = stats
        self._settings_client = settings_client
        # Keyed by index names callers choose: bounded, so invented names cannot grow memory.
        self._defaults: TTLCache[tuple[str | None]] = TTLCache(_MAX_CACHED, cache_s)
        self._built: dict[tuple[str, str], Pipeline] = {}

    async def resolve(self, index: str | None, body: dict[str, Any], params: Mapping[str, str]) -> Pipeline | None:
        chosen = body.get("search_pipeline", params.get("search_pipeline"))
        if isinstance(chosen, dict):
            return await self.build(AD_HOC_PIPELINE_ID, PipelineDefinition.parse(chosen))
        if chosen is not None and not isinstance(chosen, str):
            raise InvalidRequest(
                f"search_pipeline must be a pipeline id or a pipeline object, got {type(chosen).__name__}"
            )
        pipeline_id = chosen if chosen is not None else await self._index_default(index)
        if not _names_one(pipeline_id):
            return None
        definition = await self._store.get(pipeline_id)
        return await self.build(pipeline_id, definition) if definition is not None else None

    async def may_apply_unnamed(self, index: str | None, params: Mapping[str, str]) -> bool:
        """Whether a search whose body names no pipeline may still run one: its parameters name
        one, or its index has a default. False lets a plain search go on without its body parsed."""
        return "search_pipeline" in params or _names_one(await self._index_default(index))

    async def build(self, pipeline_id: str, definition: PipelineDefinition) -> Pipeline:
        """Build once per definition version, so processors keep their warm state."""
        key = (pipeline_id, definition.fingerprint())
        pipeline = self._built.get(key)
        if pipeline is None:
            pipeline = await self._registry.build(
                pipeline_id, definition, self._services, self._stats, inline=pipeline_id == AD_HOC_PIPELINE_ID
            )
            self._built = {k: v for k, v in self._built.items() if k[0] != pipeline_id}
            self._built[key] = pipeline
        return pipeline

    async def _index_default(self, index: str | None) -> str | None:
        target = index or "_all"
        cached = self._defaults.get(target)
        if cached is not None:
            return cached[0]
        try:
            result = await translate(
                self._settings_client.indices.get_settings(
                    index=target, name=_DEFAULT_SETTING, params={"flat_settings": "true", "ignore_unavailable": "true"}
                )
            )
        except UpstreamError:
            # The search itself will meet (and report) the same problem with the caller's credentials.
            return None
        defaults = {index_settings.get("settings", {}).get(_DEFAULT_SETTING) for index_settings in result.values()}
        # A default applies only when every targeted index agrees on it.
        default = defaults.pop() if len(defaults) == 1 else None
        self._defaults.put(target, (default,))
        return default


def _names_one(pipeline_id: str | None) -> TypeGuard[str]:
    """Whether a pipeline id or an index default picks a pipeline: ``_none`` (or nothing) picks none."""
    return bool(pipeline_id) and pipeline_id != "_none"
