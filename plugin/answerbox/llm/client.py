"""The one place answerbox talks to an LLM: the openai async client, errors translated."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

import openai
from openai.types.chat import ChatCompletion
from pydantic import BaseModel

from answerbox.core.config import LLMSettings
from answerbox.core.errors import LLMError, LLMTimeout
from answerbox.llm.call_slots import LLMSlots
from answerbox.llm.structured import PROBE, Schema, StructuredMode, from_json, response_format
from answerbox.prompts.library import PromptLibrary

if TYPE_CHECKING:
    import httpx2  # openai's HTTP client

__all__ = ["CallOptions", "Completion", "LLMClient", "Message"]

logger = logging.getLogger(__name__)

Message = dict[str, str]
_PROBE_TEMPLATE = "llm/structured_probe.j2"
_PROBE_TOKENS = 16  # {"ok": true} and some room for whitespace
# A server refuses a response_format it does not take with an error status (vLLM: 400;
# llama-cpp-python: 500, its request validation failing inside the route); these alone may
# pass with time, so they decide nothing.
_TRANSIENT = frozenset({408, 429, 502, 503, 504})


class _ProbeReply(BaseModel):
    ok: bool


@dataclass(frozen=True, kw_only=True)
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    millis: float
    cut_off: bool = False  # the reply ran into max_tokens


class CallOptions(TypedDict, total=False):
    """What one call may set; each left out (or None) is the configured value."""

    max_tokens: int | None
    stop: Sequence[str] | None
    model: str | None
    timeout_s: float | None


class LLMClient:
    """Chat completions with the configured model, temperature, token cap and timeout."""

    def __init__(
        self, settings: LLMSettings, prompts: PromptLibrary, *, transport: httpx2.AsyncBaseTransport | None = None
    ) -> None:
        """``transport`` carries the requests instead of the network (a test's in-process server)."""
        self.settings = settings
        self._prompts = prompts
        # None until auto's probe has an answer; a probe cut short by an error decides nothing.
        self._mode: StructuredMode | None = None if settings.structured_output == "auto" else settings.structured_output
        self._probe_lock = asyncio.Lock()  # concurrent first calls probe once
        self._caps_taken: bool | None = None  # whether schemas may cap string lengths; None: not yet known
        self._slots = LLMSlots(settings.max_concurrent, settings.max_concurrent_per_caller)
        self._client = (
            openai.AsyncOpenAI(
                base_url=settings.base_url,
                api_key=settings.api_key.get_secret_value(),
                timeout=settings.timeout_s,
                max_retries=0,
                http_client=openai.DefaultAsyncHttpxClient(transport=transport) if transport is not None else None,
            )
            if settings.base_url
            else None
        )

    @property
    def configured(self) -> bool:
        return self._client is not None

    def _request(self, messages: Sequence[Message], options: CallOptions) -> tuple[openai.AsyncOpenAI, dict[str, Any]]:
        if self._client is None:
            raise LLMError("no LLM is configured (llm.base_url is unset)")
        stop = options.get("stop")
        return self._client, {
            "model": options.get("model") or self.settings.model,
            "messages": list(messages),
            "temperature": self.settings.temperature,
            "max_tokens": options.get("max_tokens") or self.settings.max_tokens,
            "stop": list(stop) if stop else None,
            "timeout": options.get("timeout_s") or self.settings.timeout_s,
        }

    async def models(self) -> list[str]:
        """The model ids the endpoint lists (``GET /models``)."""
        if self._client is None:
            raise LLMError("no LLM is configured (llm.base_url is unset)")
        try:
            return [model.id async for model in self._client.models.list()]
        except openai.OpenAIError as exc:
            raise LLMError(f"the LLM did not list its models: {_failure(exc)}") from exc

    async def structured(self, *, timeout_s: float | None = None) -> bool:
        """Whether ``complete(schema=...)`` constrains the reply to the schema (auto: probes once)."""
        return await self._structured_mode(timeout_s) != "none"

    async def _structured_mode(self, timeout_s: float | None) -> StructuredMode:
        if self._mode is not None:
            return self._mode
        if self._client is None:
            return "none"
        async with self._probe_lock:
            if self._mode is None:
                found = await self._detect(timeout_s)
                if found is None:
                    return "none"  # for this call only: the next one probes again
                logger.info("the LLM at %s takes structured output as: %s", self.settings.base_url, found)
                self._mode = found
            return self._mode

    async def _detect(self, timeout_s: float | None) -> StructuredMode | None:
        for mode in ("json_schema", "json_object"):
            answered = await self._probe(mode, timeout_s)
            if answered is not False:
                return mode if answered else None
        return "none"

    async def _probe(self, mode: StructuredMode, timeout_s: float | None) -> bool | None:
        """True: the server answered the probe with its JSON; False: it refused the form or
        ignored it (prose back); None: no answer (down, slow, overloaded)."""
        message = await self._prompts.get(_PROBE_TEMPLATE).arender()
        client, args = self._request(
            [{"role": "user", "content": message}], {"max_tokens": _PROBE_TOKENS, "timeout_s": timeout_s}
        )
        args["response_format"] = response_format(mode, PROBE)
        try:
            async with asyncio.timeout(args["timeout"]):
                response = await client.chat.completions.create(**args)
            text = response.choices[0].message.content if response.choices else None
        except openai.APIStatusError as exc:
            return None if exc.status_code in _TRANSIENT else False
        except (openai.OpenAIError, TimeoutError, ValueError, TypeError, AttributeError):
            return None  # as complete() would fail: no verdict on the form
        return text is not None and from_json(_ProbeReply, text) is not None

    @contextmanager
    def _translated(self, timeout_s: float | None) -> Iterator[None]:
        try:
            yield
        except (openai.APITimeoutError, TimeoutError) as exc:
            raise LLMTimeout(f"the LLM did not answer within {timeout_s or self.settings.timeout_s:g}s") from exc
        except openai.OpenAIError as exc:
            # The provider's own words (its hosts, account, quota) are for the log, not for callers.
            logger.warning("the LLM call failed: %s", exc)
            raise LLMError(_failure(exc)) from exc
        except (ValueError, TypeError, AttributeError) as exc:
            # A reply that is not what the protocol promises (a non-JSON stream chunk, a
            # choice without a message) is the LLM's failure, not answerbox's.
            logger.warning("the LLM sent a malformed reply: %r", exc)
            raise LLMError(f"the LLM sent a malformed reply ({type(exc).__name__})") from exc

    async def complete(
        self, messages: Sequence[Message], *, schema: Schema | None = None, **options: Unpack[CallOptions]
    ) -> Completion:
        """The reply; with ``schema``, JSON fitting it where the endpoint supports that (see :meth:`structured`)."""
        client, args = self._request(messages, options)
        timeout_s = options.get("timeout_s")
        mode = await self._structured_mode(timeout_s) if schema is not None else "none"
        started = time.perf_counter()
        async with self._slots.admitted(args["timeout"]) as args["timeout"]:
            with self._translated(timeout_s):
                if schema is not None and mode != "none":
                    response = await self._create_structured(client, args, mode, schema)
                else:
                    response = await self._create(client, args)
                choice = response.choices[0] if response.choices else None
                text = choice.message.content if choice is not None else None
        if text is None:
            raise LLMError("the LLM returned no text")
        usage = response.usage
        return Completion(
            text=text,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            millis=(time.perf_counter() - started) * 1000,
            cut_off=choice is not None and choice.finish_reason == "length",
        )

    async def _create(self, client: openai.AsyncOpenAI, args: dict[str, Any]) -> ChatCompletion:
        # The client's timeout bounds each read; this bounds the whole reply, which a
        # server dripping a byte at a time would otherwise stretch forever.
        async with asyncio.timeout(args["timeout"]):
            response: ChatCompletion = await client.chat.completions.create(**args)
        return response

    async def _create_structured(
        self, client: openai.AsyncOpenAI, args: dict[str, Any], mode: StructuredMode, schema: Schema
    ) -> ChatCompletion:
        """The first capped schema a server refuses is sent again without its string caps;
        if that is taken, the server gets no caps from then on."""
        capped = schema.capped and self._caps_taken is not False
        args["response_format"] = response_format(mode, schema if capped else schema.uncapped())
        if not capped or self._caps_taken:
            return await self._create(client, args)
        try:
            response = await self._create(client, args)
        except openai.APIStatusError as exc:
            if exc.status_code in _TRANSIENT:
                raise
            args["response_format"] = response_format(mode, schema.uncapped())
            response = await self._create(client, args)
            logger.info("the LLM at %s refuses string length caps in schemas: sending none", self.settings.base_url)
            self._caps_taken = False
            return response
        self._caps_taken = True
        return response

    async def stream(
        self, messages: Sequence[Message], *, schema: Schema | None = None, **options: Unpack[CallOptions]
    ) -> AsyncIterator[str]:
        """Yield text deltas as they arrive; with ``schema``, of JSON fitting it as ``complete``'s.
        A stream is never sent again, so its schema keeps its string caps only where a server took them."""
        client, args = self._request(messages, options)
        mode = await self._structured_mode(options.get("timeout_s")) if schema is not None else "none"
        if schema is not None and mode != "none":
            args["response_format"] = response_format(mode, schema if self._caps_taken else schema.uncapped())
        finished = False
        async with self._slots.admitted(args["timeout"]) as args["timeout"]:
            with self._translated(options.get("timeout_s")):
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


def _failure(exc: openai.OpenAIError) -> str:
    """What a caller may read of an LLM failure: its kind and status, never the provider's body."""
    if isinstance(exc, openai.APIStatusError):
        return f"the LLM endpoint answered {exc.status_code}"
    if isinstance(exc, openai.APIConnectionError):
        return "the LLM endpoint cannot be reached"
    return f"the LLM call failed ({type(exc).__name__})"
