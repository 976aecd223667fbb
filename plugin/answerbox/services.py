"""What processors share: settings, the LLM, prompts, models, and a cache shared by replicas.
(OpenSearch on the caller's behalf comes per search, as ``ctx.search``.)

Built once per app in the lifespan; processors receive it at construction and do no I/O
until they run. ONNX models load lazily on first use, off the event loop.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from answerbox.config import Settings
from answerbox.llm import LLMClient
from answerbox.prompts import PromptLibrary
from answerbox.shared_cache import SharedCache

if TYPE_CHECKING:
    from opensearchpy import AsyncOpenSearch

    from answerbox.models import Models

__all__ = ["Services"]


class Services:
    def __init__(
        self, settings: Settings, llm: LLMClient, prompts: PromptLibrary, shared_cache: SharedCache
    ) -> None:
        self.settings = settings
        self.shared_cache = shared_cache
        self.llm = llm
        self.prompts = prompts
        self._models: Models | None = None
        self._models_lock = asyncio.Lock()

    @classmethod
    def create(cls, settings: Settings, service: AsyncOpenSearch) -> Services:
        """The app's services: ``service`` is the OpenSearch client with the service credentials."""
        prompts = PromptLibrary(settings.templates_dir)
        return cls(settings, LLMClient(settings.llm, prompts), prompts, SharedCache(service, settings.opensearch.cache_index))

    async def models(self) -> Models:
        """The reader and evaluator, loaded once (sessions are expensive to create)."""
        async with self._models_lock:
            if self._models is None:
                from answerbox.models import load_models  # onnxruntime is heavy; import on first use

                self._models = await asyncio.to_thread(load_models, self.settings.models)
            return self._models

    async def aclose(self) -> None:
        await self.llm.aclose()
        if self._models is not None:
            self._models.close()
