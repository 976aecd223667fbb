"""What processors share: settings, the LLM, prompts, models, and a cache shared by replicas.
(OpenSearch on the caller's behalf comes per search, as ``ctx.search``.)

Built once per app in the lifespan; processors receive it at construction and do no I/O
until they run. ONNX models load off the event loop, once: when a pipeline that needs them
is warmed up (``Processor.warm_up``), or else on first use.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from answerbox.core.config import Settings
from answerbox.llm import LLMClient
from answerbox.prompts.library import PromptLibrary
from answerbox.shared_cache import SharedCache

if TYPE_CHECKING:
    import httpx2  # openai's HTTP client
    from opensearchpy import AsyncOpenSearch

    from answerbox.models import Models

__all__ = ["Services"]


class Services:
    def __init__(self, settings: Settings, llm: LLMClient, prompts: PromptLibrary, shared_cache: SharedCache) -> None:
        self.settings = settings
        self.shared_cache = shared_cache
        self.llm = llm
        self.prompts = prompts
        self._loading: asyncio.Task[Models] | None = None

    @classmethod
    def create(
        cls, settings: Settings, service: AsyncOpenSearch, *, llm_transport: httpx2.AsyncBaseTransport | None = None
    ) -> Services:
        """The app's services: ``service`` is the OpenSearch client with the service credentials;
        ``llm_transport``, where given, carries the LLM's requests instead of the network."""
        prompts = PromptLibrary(settings.templates_dir)
        llm = LLMClient(settings.llm, prompts, transport=llm_transport)
        return cls(settings, llm, prompts, SharedCache(service, settings.opensearch.cache_index))

    async def models(self) -> Models:
        """The reader and evaluator, loaded once (sessions are expensive to create). A caller that
        gives up waiting (a cancelled search) leaves the load to finish for the next one; a load
        that failed is tried again."""
        loading = self._loading
        if loading is None or (loading.done() and (loading.cancelled() or loading.exception() is not None)):
            loading = self._loading = asyncio.get_running_loop().create_task(self._load())
        return await asyncio.shield(loading)

    async def _load(self) -> Models:
        from answerbox.models import load_models  # onnxruntime is heavy; import on first use

        return await asyncio.to_thread(load_models, self.settings.models)

    async def aclose(self) -> None:
        await self.llm.aclose()
        await self.prompts.aclose()
        if self._loading is not None:
            # A load still running finishes in its thread; what it loaded is closed all the same.
            with contextlib.suppress(Exception):
                (await self._loading).close()
