"""Stand-ins for what processors run on: the LLM, the ONNX reader and evaluator, the shared
cache, and the ``Services`` that hand them out. Scripted and recorded, in process.

``FakeLLM`` answers from a script (``replies``, used in order, the last repeating) and
records every call as the processor made it; a reply may be an ``LLMError`` (raised) or
``Slow``: it takes that long on a ``FakeClock`` (under ``tests.unit.fakes.run_on``, so a
timeout fires without waiting), and past the call's ``timeout_s`` it fails as the client
does. ``FakeReader`` finds the first of its answers that stands in a passage;
``FakeEvaluator`` scores (question, passage) pairs by a function.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Unpack

from answerbox.core.config import LLMSettings, Settings
from answerbox.core.errors import LLMError, LLMTimeout, ModelError
from answerbox.llm.client import CallOptions, Completion, LLMClient, Message
from answerbox.llm.structured import Schema
from answerbox.models import Evaluator, ModelManifest, Models, Reader, ReaderSpan
from answerbox.models.encoder import PassageEncoder
from answerbox.models.verifier import ClaimVerifier, Judgement, VerifierThresholds
from answerbox.prompts.library import PromptLibrary
from answerbox.services import Services
from answerbox.shared_cache import SharedCache

from tests.support.repo import REPO_ROOT
from tests.unit.fakes import FakeClock, take

__all__ = [
    "FakeEvaluator",
    "FakeLLM",
    "FakeReader",
    "FakeServices",
    "FakeSharedCache",
    "FakeVerifier",
    "LLMCall",
    "Slow",
    "by_words",
    "fake_models",
]


@dataclass(frozen=True)
class Slow:
    """A reply that takes ``seconds`` of the fake clock before it comes."""

    seconds: float
    text: str = "ok"


Reply = str | Callable[[list[Message]], str] | LLMError | Slow


@dataclass(frozen=True)
class LLMCall:
    """One call as the processor made it (``None``: the client's default)."""

    messages: list[Message]
    max_tokens: int | None
    stop: list[str] | None
    model: str | None
    timeout_s: float | None
    schema: Schema | None
    stream: bool = False

    @classmethod
    def of(
        cls, messages: Sequence[Message], options: CallOptions, *, schema: Schema | None = None, stream: bool = False
    ) -> LLMCall:
        """The call as ``complete`` or ``stream`` received it, with the real client's options."""
        stop = options.get("stop")
        return cls(
            [dict(m) for m in messages],
            options.get("max_tokens"),
            list(stop) if stop else None,
            options.get("model"),
            options.get("timeout_s"),
            schema,
            stream,
        )

    @property
    def prompt(self) -> str:
        """The last message's text: what the processor asked."""
        return self.messages[-1]["content"]


class FakeLLM(LLMClient):
    """An LLM that answers from ``replies`` and records ``calls``; ``structured`` is whether it
    takes schemas; ``gate``, when set, holds every call until it opens."""

    def __init__(
        self,
        settings: LLMSettings,
        prompts: PromptLibrary,
        *,
        replies: Sequence[Reply] = ("ok",),
        structured: bool = False,
        configured: bool = True,
        clock: FakeClock | None = None,
    ) -> None:
        super().__init__(settings.model_copy(update={"base_url": None}), prompts)  # no client: nothing is sent
        self.replies: list[Reply] = list(replies)
        self.calls: list[LLMCall] = []
        self.structured_output = structured
        self.available = configured
        self.clock = clock
        self.gate: asyncio.Event | None = None
        self.millis = 12.5  # what every completion reports having taken
        self.cut_at_max_tokens = False  # end a reply longer than max_tokens (one word a token) there

    @property
    def configured(self) -> bool:
        return self.available

    async def structured(self, *, timeout_s: float | None = None) -> bool:
        return self.available and self.structured_output

    async def complete(
        self, messages: Sequence[Message], *, schema: Schema | None = None, **options: Unpack[CallOptions]
    ) -> Completion:
        call = LLMCall.of(messages, options, schema=schema)
        text = await self._reply(call)
        words = text.split()
        cut = self.cut_at_max_tokens and call.max_tokens is not None and len(words) > call.max_tokens
        if cut:
            text = " ".join(words[: call.max_tokens])
        return Completion(
            text=text, prompt_tokens=10, completion_tokens=len(text.split()), millis=self.millis, cut_off=cut
        )

    async def stream(
        self, messages: Sequence[Message], *, schema: Schema | None = None, **options: Unpack[CallOptions]
    ) -> AsyncIterator[str]:
        text = await self._reply(LLMCall.of(messages, options, schema=schema, stream=True))
        for word in text.split(" "):
            yield word + " "

    async def _reply(self, call: LLMCall) -> str:
        self.calls.append(call)
        if not self.available:
            raise LLMError("no LLM is configured (llm.base_url is unset)")
        if self.gate is not None:
            await self.gate.wait()
        reply = self.replies[min(len(self.calls), len(self.replies)) - 1]
        if isinstance(reply, LLMError):
            raise reply
        if isinstance(reply, Slow):
            assert self.clock is not None, "a Slow reply needs the FakeLLM's clock"
            if call.timeout_s is not None and reply.seconds > call.timeout_s:
                # What the client does when a call outlasts its timeout.
                await take(self.clock, call.timeout_s)
                raise LLMTimeout(f"the LLM did not answer within {call.timeout_s:g}s")
            await take(self.clock, reply.seconds)
            return reply.text
        return reply(call.messages) if callable(reply) else reply


class _FakeModel:
    """What every fake model call does before it answers: takes ``latency_s`` of ``clock``
    (when given), then raises ``failure`` (when given)."""

    def __init__(self, *, failure: ModelError | None, clock: FakeClock | None, latency_s: float) -> None:
        # No encoder: the one method a processor calls is all a fake answers.
        self.failure = failure
        self.clock = clock
        self.latency_s = latency_s

    async def _called(self) -> None:
        if self.clock is not None:
            await take(self.clock, self.latency_s)
        if self.failure is not None:
            raise self.failure


class FakeReader(_FakeModel, Reader):
    """Reads each passage as the first of ``answers`` standing in it (no span when none does),
    with a relevance logit above θ unless a test sets θ above it. With ``clock``, each call
    takes ``latency_s`` of it."""

    CONFIDENCE = 5.0
    PROBABILITY = 0.5
    COVERED_PROBABILITY = 0.75
    OVER_NO_ANSWER = 4.0

    def __init__(
        self,
        answers: Sequence[str] = (),
        *,
        failure: ModelError | None = None,
        clock: FakeClock | None = None,
        latency_s: float = 0.0,
    ) -> None:
        super().__init__(failure=failure, clock=clock, latency_s=latency_s)
        self.answers = list(answers)
        self.reads: list[tuple[str, list[str]]] = []

    async def read(self, question: str, passages: Sequence[str]) -> list[ReaderSpan]:
        self.reads.append((question, list(passages)))
        await self._called()
        return [self._found(passage) for passage in passages]

    async def read_answer(self, question: str, passage: str, answer: str | None) -> tuple[ReaderSpan, float | None]:
        """Its span, and a gap of 0 for an answer that is that span; it rates no other answer (None)."""
        (span,) = await self.read(question, [passage])
        return span, 0.0 if answer and answer == span.text else None

    def _found(self, passage: str) -> ReaderSpan:
        for answer in self.answers:
            start = passage.find(answer)
            if answer and start >= 0:
                end = start + len(answer)
                return ReaderSpan(
                    answer,
                    start,
                    end,
                    confidence=self.CONFIDENCE,
                    probability=self.PROBABILITY,
                    covered_probability=self.COVERED_PROBABILITY,
                    over_no_answer=self.OVER_NO_ANSWER,
                )
        return ReaderSpan("", 0, 0, confidence=-10.0)


class FakeEvaluator(_FakeModel, Evaluator):
    """Scores each (question, passage) pair by ``score``; records every call. With ``clock``,
    each call takes ``latency_s`` of it."""

    def __init__(
        self,
        score: Callable[[str, str], float] = lambda q, p: 0.0,
        *,
        failure: ModelError | None = None,
        clock: FakeClock | None = None,
        latency_s: float = 0.0,
    ) -> None:
        super().__init__(failure=failure, clock=clock, latency_s=latency_s)
        self._score = score
        self.calls: list[tuple[str, list[str]]] = []

    async def score(self, question: str, passages: Sequence[str]) -> list[float]:
        self.calls.append((question, list(passages)))
        await self._called()
        return [self._score(question, passage) for passage in passages]


def by_words(scores: Mapping[str, float], default: float = -0.95) -> Callable[[str, str], float]:
    """A scorer: a passage scores as the first of ``scores``' keys it contains, else ``default``."""
    return lambda question, passage: next((s for key, s in scores.items() if key in passage), default)


class FakeVerifier(ClaimVerifier):
    """The claim verifier as a rule: ``judge(evidence, claim)`` gives (P(entailed), P(contradicted))."""

    def __init__(
        self,
        judge: Callable[[str, str], tuple[float, float]],
        thresholds: VerifierThresholds | None = None,
    ) -> None:  # no session: nothing to run
        self._judge = judge
        self.thresholds = thresholds or VerifierThresholds(entailed_above=0.5, contradicted_above=0.5)
        self.calls: list[list[tuple[str, str]]] = []

    async def judge(self, pairs: Sequence[tuple[str, str]]) -> list[Judgement]:
        self.calls.append(list(pairs))
        return [Judgement(*self._judge(evidence, claim)) for evidence, claim in pairs]

    def close(self) -> None:
        pass


class _NoEncoder(PassageEncoder):
    def __init__(self) -> None:  # nothing to run: the fake reader and evaluator encode nothing
        pass

    def close(self) -> None:
        pass


def fake_models(
    reader: Reader | None = None,
    evaluator: Evaluator | None = None,
    verifier: ClaimVerifier | None = None,
    **manifest: Any,
) -> Models:
    """The models a processor gets: these fakes and a manifest with ``manifest``'s fields."""
    return Models(
        verifier=verifier,
        reader=reader or FakeReader(),
        evaluator=evaluator or FakeEvaluator(),
        manifest=ModelManifest(task="fake", variants={}, **manifest),
        provider="FakeExecutionProvider",
        directory=Path("fake"),
        encoder=_NoEncoder(),
    )


class FakeSharedCache(SharedCache):
    """The shared cache as a dict: what a replica puts, any replica gets (TTLs are not kept)."""

    def __init__(self) -> None:  # no OpenSearch
        self.values: dict[str, str] = {}
        self.puts: list[tuple[str, str, float]] = []

    async def get(self, key: str) -> str | None:
        return self.values.get(key)

    async def put(self, key: str, value: str, ttl_s: float) -> None:
        self.puts.append((key, value, ttl_s))
        self.values[key] = value


class FakeServices(Services):
    """Services on fakes: ``llm`` scripted (``replies``), ``models`` given (or their failure
    to load), settings from ``settings`` over the repository's templates."""

    llm: FakeLLM
    shared_cache: FakeSharedCache

    def __init__(
        self,
        *,
        replies: Sequence[Reply] = ("ok",),
        structured: bool = False,
        llm_configured: bool = True,
        models: Models | ModelError | None = None,
        shared_cache: FakeSharedCache | None = None,
        clock: FakeClock | None = None,
        **settings: Any,
    ) -> None:
        config = Settings(**{"templates_dir": REPO_ROOT / "templates", **settings})
        prompts = PromptLibrary(config.templates_dir)
        llm = FakeLLM(
            config.llm, prompts, replies=replies, structured=structured, configured=llm_configured, clock=clock
        )
        super().__init__(config, llm, prompts, shared_cache or FakeSharedCache())
        self._models: Models | ModelError = models if models is not None else fake_models()

    async def models(self) -> Models:
        if isinstance(self._models, ModelError):
            raise self._models
        return self._models
