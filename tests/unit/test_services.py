"""The models load once, and a caller that stops waiting leaves the load for the next one."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from answerbox.core.config import Settings
from answerbox.core.errors import ModelError
from answerbox.llm import LLMClient
from answerbox.prompts.library import PromptLibrary
from answerbox.services import Services
from answerbox.shared_cache import SharedCache

from tests.support.repo import REPO_ROOT


class _Models:
    closed = False

    def close(self) -> None:
        self.closed = True


class _GatedServices(Services):
    """Its load waits for ``gate``; ``failures`` loads fail first."""

    def __init__(self, failures: int = 0) -> None:
        settings = Settings(templates_dir=REPO_ROOT / "templates")
        prompts = PromptLibrary(settings.templates_dir)
        super().__init__(settings, LLMClient(settings.llm, prompts), prompts, SharedCache(None, "unused"))  # type: ignore[arg-type]
        self.gate = asyncio.Event()
        self.loads = 0
        self.failures = failures

    async def _load(self) -> Any:
        self.loads += 1
        await self.gate.wait()
        if self.loads <= self.failures:
            raise ModelError("no model here")
        return _Models()


def test_a_cancelled_wait_leaves_the_load_to_finish_for_the_next_caller() -> None:
    async def scenario() -> None:
        services = _GatedServices()
        first = asyncio.create_task(services.models())
        await asyncio.sleep(0)
        first.cancel()
        second = asyncio.create_task(services.models())
        await asyncio.sleep(0)
        services.gate.set()
        models = await second
        assert first.cancelled()
        assert services.loads == 1
        assert await services.models() is models
        assert services.loads == 1
        await services.aclose()
        assert cast(_Models, models).closed

    asyncio.run(scenario())


def test_a_load_that_failed_is_tried_again() -> None:
    async def scenario() -> None:
        services = _GatedServices(failures=1)
        services.gate.set()
        try:
            await services.models()
        except ModelError:
            pass
        else:
            raise AssertionError("the first load should have failed")
        assert isinstance(await services.models(), _Models)
        assert services.loads == 2
        await services.aclose()

    asyncio.run(scenario())
