"""The one place answerbox talks to an LLM: the openai async client, errors translated."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import openai

from answerbox.config import LLMSettings
from answerbox.errors import LLMError, LLMTimeout

__all__ = ["Completion", "LLMClient", "Message"]

Message = dict[str, str]


@dataclass(frozen=True, kw_only=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    millis: float


class LLMClient:
    """Chat completions with the configured model, temperature, token cap and timeout."""

    def __init__(self, settings: LLMSettings) -> None:
        self.settings = settings
        self._client = (
            openai.AsyncOpenAI(
                base_url=settings.base_url,
                api_key=settings.api_key.get_secret_value(),
                timeout=settings.timeout_s,
                max_retries=0,
            )
            if settings.base_url
            else None
        )

    @property
    def configured(self) -> bool:
        return self._client is not None

    def _request(
        self,
        messages: Sequence[Message],
        max_tokens: int | None,
        stop: Sequence[str] | None,
        model: str | None,
        timeout_s: float | None,
    ) -> tuple[openai.AsyncOpenAI, dict[str, Any]]:
        if self._client is None:
            raise LLMError("no LLM is configured (llm.base_url is unset)")
        return self._client, {
            "model": model or self.settings.model,
            "messages": list(messages),
            "temperature": self.settings.temperature,
            "max_tokens": max_tokens or self.settings.max_tokens,
            "stop": list(stop) if stop else None,
            "timeout": timeout_s or self.settings.timeout_s,
        }

    @contextmanager
    def _translated(self, timeout_s: float | None) -> Iterator[None]:
        try:
            yield
        except (openai.APITimeoutError, TimeoutError) as exc:
            raise LLMTimeout(f"the LLM did not answer within {timeout_s or self.settings.timeout_s:g}s") from exc
        except openai.OpenAIError as exc:
            raise LLMError(f"the LLM call failed: {exc}") from exc
        except (ValueError, TypeError, AttributeError) as exc:
            # A reply that is not what the protocol promises (a non-JSON stream chunk, a
            # choice without a message) is the LLM's failure, not answerbox's.
            raise LLMError(f"the LLM sent a malformed reply: {type(exc).__name__}: {exc}") from exc

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        stop: Sequence[str] | None = None,
        model: str | None = None,
        timeout_s: float | None = None,
    ) -> Completion:
        client, args = self._request(messages, max_tokens, stop, model, timeout_s)
        started = time.perf_counter()
        with self._translated(timeout_s):
            # The client's timeout bounds each read; this bounds the whole reply, which a
            # server dripping a byte at a time would otherwise stretch forever.
            async with asyncio.timeout(args["timeout"]):
                response = await client.chat.completions.create(**args)
            message = response.choices[0].message if response.choices else None
            text = message.content if message is not None else None
        if text is None:
            raise LLMError("the LLM returned no text")
        usage = response.usage
        return Completion(
            text=text,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            millis=(time.perf_counter() - started) * 1000,
        )

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        stop: Sequence[str] | None = None,
        model: str | None = None,
        timeout_s: float | None = None,
    ) -> AsyncIterator[str]:
        """Yield text deltas as they arrive."""
        client, args = self._request(messages, max_tokens, stop, model, timeout_s)
        finished = False
        with self._translated(timeout_s):
            chunks = await client.chat.completions.create(**args, stream=True)
            async for chunk in chunks:
                if not chunk.choices:
                    continue
                finished = finished or chunk.choices[0].finish_reason is not None
                if chunk.choices[0].delta.content:
                    yield chunk.choices[0].delta.content
        # Some servers (llama.cpp when interrupted) end a stream early without saying why.
        if not finished:
            raise LLMError("the LLM stream ended without a finish reason")

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
