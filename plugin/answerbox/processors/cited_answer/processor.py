"""``cited_answer``: a FreshPrompt answer whose every citation is checked, with an extractive fallback.

One LLM call over numbered evidence blocks (methods.md §4); the LLM cites ``[k]``; each
citation is resolved to the hit's field and character span and checked by the evaluator;
unsupported ones are removed, and an answer left with no supported claim abstains. The
reader's best span (a featured snippet) comes first: with no LLM, when it fails, or when the
snippet is confident enough (``skip_llm_above``), it is the answer. Every answer carries its
calibrated ``confidence`` (``answerbox.models.confidence``); below ``min_confidence`` it
abstains and is kept as ``answer.candidate``. Which answer is returned: ``answering.policy``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any, ClassVar, Literal, cast

from pydantic import Field

from answerbox.core.contract import Answer, AnswerMode, CheckedSentence, FlaggedClaim, FlagReason
from answerbox.core.errors import ConfigError, LLMError, LLMTimeout, ModelError
from answerbox.llm.client import Completion, Message
from answerbox.models.confidence import AnswerCalibrator, signals_record
from answerbox.pipeline.base import (
    JSON,
    PipelineContext,
    Planning,
    ProcessorConfig,
    ResponseProcessor,
    SearchRequest,
    Sourced,
    StepPlan,
    first_set,
)
from answerbox.pipeline.limits.request_limits import LLMModel, LLMTokens, Override
from answerbox.processors.answering.evidence import (
    EVIDENCE_SIZE,
    READING_CHARS,
    SNIPPET_CHARS,
    Evidence,
    EvidenceFields,
    answer_evidence,
    in_context,
    written_date,
)
from answerbox.processors.answering.extractive import beside_the_snippet, featured_snippet
from answerbox.processors.answering.policy import (
    AnswerPlan,
    AnswerRules,
    Mode,
    Prefer,
    abstention,
    answer_plan,
    asks_llm,
    choose,
    gate,
)
from answerbox.processors.cited_answer.citations import (
    ANSWER_SCHEMA,
    Check,
    ClaimVerdict,
    StreamedAnswer,
    citation_of,
    read_answer,
    rewrite,
    scorer_of,
    without_echoed_fields,
)
from answerbox.processors.cited_answer.sentence_hold import SentenceHold
from answerbox.processors.text.claims import Claim, parse_claims
from answerbox.processors.text.passages import hits_of

if TYPE_CHECKING:
    from answerbox.models import Models
    from answerbox.services import Services

__all__ = ["CitedAnswer", "CitedAnswerConfig"]

_PROMPT = "cited_answer/freshprompt.j2"
_SYSTEM = "cited_answer/system.j2"
_EVIDENCE_IS_DATA = "cited_answer/evidence_is_data.j2"
_CALLER_INSTRUCTIONS = "cited_answer/caller_instructions.j2"
# The LLM gets at most this share of the processor's time left: the rest is for the
# citation check or the extractive fallback, so a slow LLM never costs the answer.
_LLM_SHARE = 0.7
# One block of every field, for the test render of a pipeline's prompt.
_SAMPLE = Evidence(index="i", id="d", field="text", excerpts=(), rank=0, marker=1, source="s", title="t")


class CitedAnswerConfig(AnswerRules):
    # Which answer the search returns: the table in ``answering.policy``.
    mode: Mode = "auto"
    prefer: Prefer = "confident"
    fields: EvidenceFields = EvidenceFields()
    size: int = Field(default=EVIDENCE_SIZE, ge=1, le=50, description="evidence blocks (n); ext context_size overrides")
    snippet_chars: int = Field(default=SNIPPET_CHARS, ge=100, le=20_000)
    reading_chars: int = Field(default=READING_CHARS, ge=100, le=20_000)  # the reader's context per passage
    demonstrations: bool = True
    premise_check: bool = False  # helps strong models, hurts weak ones (FreshPrompt)
    current_date: date | None = None  # None: today (UTC)
    max_tokens: LLMTokens = Field(default=256, ge=1, le=4096)
    timeout_s: float | None = Field(default=None, gt=0)
    model: LLMModel = None
    prompt: Override[str | None] = Field(default=None, min_length=1, description="Jinja2 text replacing freshprompt.j2")
    check_citations: bool = True
    attribute_uncited: bool = Field(
        default=True, description="cite an uncited sentence's best block when it passes the check"
    )
    # What a cited block must give the claim. With the claim verifier, the probability that the
    # block entails the claim (None: the verifier's threshold, chosen on held-out training
    # data); without it, the evaluator's score (None: the model's calibrated support_lower: 95%
    # of passages holding the answer score above it).
    min_entailment: float | None = Field(default=None, ge=0, le=1)
    min_support: float | None = Field(default=None, ge=-1, le=1)
    min_coverage: float = Field(default=0.5, ge=0, le=1, description="share of a claim's new words the block must hold")
    # A sentence neither entailed nor contradicted by its blocks: dropped, or shown without its
    # markers and flagged ``shown`` (not checked). An answer with no entailed sentence still abstains.
    unverified: Literal["drop", "show"] = "drop"
    abstain_text: str = Field(default="The search results do not support an answer.", min_length=1)


@dataclass(frozen=True, slots=True, kw_only=True)
class CitedAnswerPlan(AnswerPlan):
    mode: Sourced[Mode]
    prefer: Sourced[Prefer]
    size: Sourced[int]
    model: Sourced[str] | None = None  # None: the LLM is not asked (mode extractive)
    llm_timeout_s: Sourced[float] | None = None


class CitedAnswer(ResponseProcessor[CitedAnswerConfig]):
    type_name: ClassVar[str] = "cited_answer"
    uses_models: ClassVar[bool] = True
    config_model: ClassVar[type[ProcessorConfig]] = CitedAnswerConfig
    budget_weight: ClassVar[float] = 2.0
    writes_answer: ClassVar[bool] = True

    def __init__(self, config: CitedAnswerConfig, services: Services) -> None:
        super().__init__(config, services)
        # Loaded now, and test-rendered by ``check``, as query expansion's: an override that does not
        # parse or uses an unknown variable is refused when the pipeline is defined, not at search time.
        try:
            self._prompt = services.prompts.get(_PROMPT, config.prompt)
        except ConfigError as exc:
            raise ConfigError(f"processor [{self.name}]: {exc.reason}") from exc

    async def check(self) -> None:
        await self._user_prompt("q", [_block(_SAMPLE)], "January 1, 2026", "i", json=False)

    async def process_response(self, request: SearchRequest, response: JSON, ctx: PipelineContext) -> JSON:
        """The checked answer lands in ``ctx.report.answer``; a run's listener hears the
        reader's snippet, then each sentence of the LLM's that holds up, once checked."""
        question = ctx.question
        if not question or not question.strip():
            self.warn(ctx, "the search has no question text; no answer")
            return response
        plan = ctx.plan(self, CitedAnswerPlan)
        hits = hits_of(response)
        blocks = self._evidence(hits, plan.size.value, ctx)
        if not blocks:
            incorrect = ctx.report.retrieval is not None and ctx.report.retrieval.verdict == "incorrect"
            kind: AnswerMode = "extractive" if plan.mode.value == "extractive" else "generative"
            ctx.report.answer = abstention(
                self.config.abstain_text, kind, "retrieval_incorrect" if incorrect else "no_evidence"
            )
            return response
        calibrator = plan.calibrator
        policy = plan.policy(self.config.abstain_text, plan.mode.value, plan.prefer.value)
        reading = in_context(blocks, hits, max_chars=self.config.reading_chars)
        snippet = await self._snippet(question, reading, calibrator, ctx)
        if snippet is not None and ctx.listener is not None:
            ctx.listener.snippet(gate(snippet, policy))  # shown as the answer will be
        generated = await self._generative(question, blocks, ctx) if asks_llm(snippet, policy) else None
        if generated is not None and not generated.abstained:
            generated = _scored(generated, snippet, calibrator)
        ctx.report.answer = answer = choose(snippet, generated, policy)
        if generated is not None and generated.abstained and answer.mode == "extractive":
            self.warn(ctx, "no claim of the LLM's answer held up; answering extractively")
        return response

    async def _generative(self, question: str, blocks: Sequence[Evidence], ctx: PipelineContext) -> Answer | None:
        """The LLM's checked answer; None when the LLM failed."""
        parts: list[str] = []
        hold = SentenceHold()
        try:
            async for text in self._generate(question, blocks, ctx):
                parts.append(text)
                if ctx.listener is not None:
                    await self._stream(hold.feed(text), question, blocks, ctx)
            if ctx.listener is not None:
                await self._stream(hold.flush(), question, blocks, ctx)
            if not "".join(parts).strip():
                raise LLMError("the LLM returned no text")
        except LLMError as exc:
            self.warn(ctx, f"the LLM failed ({exc.reason}); answering extractively")
            if ctx.listener is not None:
                ctx.listener.failed(exc)
            return None
        return await self._checked("".join(parts), question, blocks, ctx)

    async def _stream(
        self, sentences: Sequence[str], question: str, blocks: Sequence[Evidence], ctx: PipelineContext
    ) -> None:
        """Each sentence to the listener once checked, as the whole answer will be; or not at all.
        Its flags are the whole answer's to report, once."""
        assert ctx.listener is not None
        for sentence in sentences:
            checked = await self._checked(sentence, question, blocks, ctx, warn=False)
            if not checked.abstained:
                verdict: Literal["supported", "unchecked"] = "supported" if self.config.check_citations else "unchecked"
                ctx.listener.sentence(CheckedSentence(text=checked.text, citations=checked.citations, verdict=verdict))
            elif shown := list(dict.fromkeys(f.sentence for f in checked.flagged if f.shown)):
                ctx.listener.sentence(CheckedSentence(text=" ".join(shown), verdict="unverified"))

    def _evidence(self, hits: Sequence[JSON], size: int, ctx: PipelineContext) -> list[Evidence]:
        if ctx.report.chain is not None and not ctx.report.chain.references:
            self.warn(ctx, "the chain verified nothing; answering from the search results")
        return answer_evidence(ctx.report, hits, self.config.fields, size=size, snippet_chars=self.config.snippet_chars)

    async def _messages(
        self, question: str, blocks: Sequence[Evidence], ctx: PipelineContext, *, json: bool
    ) -> list[Message]:
        qa = ctx.generative_qa
        today = self.config.current_date or datetime.now(UTC).date()
        current = written_date(today)
        # The system message is our rules alone; the caller's instructions (its system_prompt
        # joined in, pipeline/limits/request_limits.py) go in the user message, quoted and marked as
        # lower-priority data: any caller may set them.
        system = "\n".join(
            [
                await self.services.prompts.get(_SYSTEM).arender(current_date=current),
                await self.services.prompts.get(_EVIDENCE_IS_DATA).arender(),
            ]
        )
        instructions = qa.user_instructions if qa else None
        if instructions:
            instructions = await self.services.prompts.get(_CALLER_INSTRUCTIONS).arender(instructions=instructions)
        user = await self._user_prompt(question, [_block(e) for e in blocks], current, instructions, json=json)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    async def _user_prompt(
        self, question: str, evidence: list[dict[str, Any]], current: str, instructions: str | None, *, json: bool
    ) -> str:
        return await self._prompt.arender(
            question=question,
            evidence=evidence,
            current_date=current,
            demonstrations=self.config.demonstrations,
            premise_check=self.config.premise_check,
            user_instructions=instructions,
            json=json,
        )

    async def _generate(
        self, question: str, blocks: Sequence[Evidence], ctx: PipelineContext
    ) -> AsyncGenerator[str, None]:
        plan = ctx.plan(self, CitedAnswerPlan)
        if plan.model is None or plan.llm_timeout_s is None:
            raise LLMError("the plan asks no LLM")  # never: a plan without one is extractive
        timeout = min(plan.llm_timeout_s.value, ctx.deadline.share(_LLM_SHARE))
        # One prompt and one reply format for a search and a stream: a stream reads the JSON
        # reply's sentences as each closes.
        structured = await self.services.llm.structured(timeout_s=timeout)
        messages = await self._messages(question, blocks, ctx, json=structured)
        options: dict[str, Any] = {
            "max_tokens": self.config.max_tokens,
            "model": plan.model.value,
            "timeout_s": timeout,
        }
        schema = ANSWER_SCHEMA if structured else None
        # Without a listener for tokens, one plain call: some servers (llama.cpp's
        # interrupt_requests) silently end a stream early when another request waits.
        deltas = (
            _as_read(cast(AsyncGenerator[str, None], self.services.llm.stream(messages, **options, schema=schema)))
            if ctx.listener is not None
            else _whole(self.services.llm.complete(messages, **options, schema=schema), structured)
        )
        # A deadline per chunk, not around the loop: a timeout must never fire while the
        # consumer holds a token (it would cancel the consumer, not the LLM).
        deadline = asyncio.get_running_loop().time() + timeout
        async with aclosing(deltas):  # closing early closes the LLM's HTTP stream
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        text = await anext(deltas, None)
                except TimeoutError as exc:
                    raise LLMTimeout(f"the LLM did not finish within {timeout:g}s") from exc
                if text is None:
                    return
                yield text

    async def _models(self, say: Callable[[str], None]) -> Models | None:
        try:
            return await self.services.models()
        except ModelError as exc:
            say(f"no citation can be checked, the evaluator is unavailable: {exc.reason}")
            return None

    async def _checked(
        self, text: str, question: str, blocks: Sequence[Evidence], ctx: PipelineContext, *, warn: bool = True
    ) -> Answer:
        """``text`` checked; ``warn`` off, its flags and failures go unreported (a sentence
        streamed ahead of the whole answer, whose check reports them once)."""
        say: Callable[[str], None] = (lambda message: self.warn(ctx, message)) if warn else _quiet
        text = without_echoed_fields(text)
        claims = parse_claims(text)
        cited = [c for c in claims if c.markers]
        uncited = [c for c in claims if not c.markers] if self.config.attribute_uncited else []
        by_marker = {e.marker: e for e in blocks}
        models = await self._models(say) if self.config.check_citations else None
        options: dict[str, Any] = {
            "question": question,
            "min_support": self._min_support(models),
            "min_coverage": self.config.min_coverage,
            "required": self.config.check_citations,
        }
        try:
            answers = await _answers(question, blocks, models) if models and claims else {}
            checker = Check(scorer=scorer_of(models) if models else None, answers=answers, **options)
            verdicts = await checker.cited(cited, by_marker)
            if models and uncited:
                verdicts += await checker.attributed(uncited, blocks)
        except ModelError as exc:
            say(f"no citation can be checked, the evaluator failed: {exc.reason}")
            verdicts = await Check(scorer=None, **options).cited(cited, by_marker)
        entailment = models is not None and models.verifier is not None
        unverified = (
            _unverified(verdicts) if self.config.unverified == "show" and self.config.check_citations else set()
        )
        flagged = _flag(verdicts, say, entailment=entailment, shown=unverified)
        kept = [v for v in verdicts if v.supported]
        if not kept:
            return abstention(self.config.abstain_text, "generative", "unsupported", llm="used", flagged=flagged)
        citations = list({(c.marker, c.start, c.end): c for c in map(citation_of, kept)}.values())
        shown = rewrite(text, verdicts)
        if self.config.check_citations:
            # Only what held up is the answer: a sentence left with no citation was checked
            # against nothing, and is in ``flagged`` (or was never cited) — as the stream shows;
            # with ``unverified: show``, so is one flagged ``shown``.
            said = {c.plain for c in unverified}
            shown = " ".join(c.text.strip() for c in parse_claims(shown) if c.markers or c.plain in said)
        return Answer(text=shown, citations=citations, mode="generative", flagged=flagged, llm="used")

    def writes_from_knowledge(self, plan: StepPlan) -> bool:
        # The reader reads passages, not strips.
        return not (isinstance(plan, CitedAnswerPlan) and plan.mode.value == "extractive")

    async def plan(self, planning: Planning) -> CitedAnswerPlan:
        config, qa, llm = self.config, planning.qa, self.services.settings.llm
        extractive = config.mode == "extractive" or not self.services.llm.configured  # no LLM: the reader alone
        asks = {
            "model": first_set(
                (qa.llm_model if qa else None, "request"), (config.model, "pipeline"), (llm.model, "settings")
            ),
            "llm_timeout_s": first_set(
                (qa.timeout if qa else None, "request"), (config.timeout_s, "pipeline"), (llm.timeout_s, "settings")
            ),
        }
        return await answer_plan(
            CitedAnswerPlan,
            config,
            self.services,
            planning,
            # Its answer would not be the search's: a later step's is (``Pipeline.answer_step``).
            skipped=None if planning.answers else "a later step writes the answer",
            mode=config.sourced("mode", config.mode)
            if self.services.llm.configured
            else Sourced("extractive", "settings"),
            prefer=config.sourced("prefer", config.prefer),
            size=Sourced(qa.context_size, "request") if qa and qa.context_size else config.sourced("size", config.size),
            **({} if extractive else asks),
        )

    async def _snippet(
        self, question: str, blocks: Sequence[Evidence], calibrator: AnswerCalibrator, ctx: PipelineContext
    ) -> Answer | None:
        """The reader's featured snippet, scored; None when the reader has none."""
        try:
            # Within the time left: under load an abstention, never a failed search.
            async with asyncio.timeout(ctx.deadline.for_work()):
                models = await self.services.models()
                found = await featured_snippet(question, blocks, models)
        except ModelError as exc:
            self.warn(ctx, f"the reader is unavailable, no extractive answer: {exc.reason}")
            return None
        except TimeoutError:
            self.warn(ctx, "the reader did not finish in the time left; no extractive answer")
            return None
        if found is None:
            return None
        return found.answer.model_copy(
            update={"confidence": calibrator.confidence(found.signals), "signals": signals_record(found.signals)}
        )

    def _min_support(self, models: Models | None) -> float:
        if models is not None and models.verifier is not None:
            given = self.config.min_entailment
            return given if given is not None else models.verifier.thresholds.entailed_above
        if self.config.min_support is not None:
            return self.config.min_support
        return models.manifest.support_lower if models else -1.0


async def _whole(completion: Awaitable[Completion], structured: bool) -> AsyncGenerator[str, None]:
    yield read_answer((await completion).text, structured)


async def _as_read(deltas: AsyncGenerator[str, None]) -> AsyncGenerator[str, None]:
    """A streamed reply as ``read_answer`` reads it: a JSON reply's sentences as each closes."""
    reading = StreamedAnswer()
    async with aclosing(deltas):
        async for delta in deltas:
            if text := reading.feed(delta):
                yield text
    if text := reading.flush():
        yield text


def _scored(answer: Answer, snippet: Answer | None, calibrator: AnswerCalibrator) -> Answer:
    """The LLM's held-up ``answer`` with its confidence, read beside the reader's ``snippet``."""
    signals = beside_the_snippet(
        answer.text,
        support=max((c.support for c in answer.citations if c.support is not None), default=0.0),
        snippet=snippet.text if snippet is not None else "",
        snippet_confidence=calibrator.recalibration.undo(snippet.confidence or 0.0) if snippet is not None else 0.0,
    )
    return answer.model_copy(update={"confidence": calibrator.confidence(signals), "signals": signals_record(signals)})


async def _answers(question: str, blocks: Sequence[Evidence], models: Models) -> dict[int, str]:
    """The reader's answer in each block: what a misquote changes, and what an uncited claim must
    state to be attributed (the encoder caches it for the answer's next sentence)."""
    spans = await models.reader.read(question, [b.snippet for b in blocks])
    return {b.marker: span.text for b, span in zip(blocks, spans, strict=True)}


def _block(evidence: Evidence) -> dict[str, Any]:
    # The template puts every field through `oneline`, so a document cannot open a line of its
    # own in the prompt ("question: ...", "answer: ...") and pass for the prompt's structure.
    return {
        "marker": evidence.marker,
        "source": evidence.source,
        "date": evidence.date_text,
        "title": evidence.title,
        "snippet": evidence.snippet,
        "highlight": evidence.highlight,
    }


def _quiet(message: str) -> None:
    pass


def _unverified(verdicts: Sequence[ClaimVerdict]) -> set[Claim]:
    """The claims none of whose citations is entailed or contradicted: shown, not checked, under
    ``unverified: show``. One citing a block that addresses the model stays out: it may be the
    instruction obeyed."""
    by_claim: dict[Claim, list[ClaimVerdict]] = {}
    for verdict in verdicts:
        by_claim.setdefault(verdict.claim, []).append(verdict)
    return {
        claim
        for claim, found in by_claim.items()
        if all(v.verdict == "unverified" and not (v.evidence is not None and v.evidence.instructs) for v in found)
    }


_WHY_FLAGGED: dict[FlagReason, str] = {
    "no_evidence": "citation [{marker}] matches no evidence",
    "instructions": "block [{marker}] gives the model instructions, so it supports nothing",
    "unchecked": "citation [{marker}] could not be checked",
    "contradicted": "block [{marker}] says otherwise ({quote!r})",
}


def _flag(
    verdicts: Sequence[ClaimVerdict], warn: Callable[[str], None], *, entailment: bool, shown: set[Claim]
) -> list[FlaggedClaim]:
    """The claims whose citation the check removed, for ``answer.flagged`` and as warnings;
    ``entailment``: the verifier checked them (a claim it does not find is ``not_found``);
    ``shown``: the claims in the answer's text all the same (``unverified: show``)."""
    flagged = []
    for verdict in (v for v in verdicts if not v.supported):
        reason: FlagReason = (
            "no_evidence"
            if verdict.evidence is None
            else "instructions"
            if verdict.evidence.instructs
            else "unchecked"
            if verdict.support is None
            else "contradicted"
            if verdict.contradicted
            else "not_found"
            if entailment
            else "unsupported"
        )
        claim = FlaggedClaim(
            sentence=verdict.claim.plain,
            marker=verdict.marker,
            reason=reason,
            support=round(verdict.support, 4) if verdict.support is not None else None,
            quote=verdict.quote.text if verdict.contradicted and verdict.quote is not None else None,
            shown=verdict.claim in shown,
        )
        done = "shown unchecked" if claim.shown else "removed from"
        if reason in _WHY_FLAGGED:
            why = _WHY_FLAGGED[reason].format(marker=claim.marker, quote=claim.quote)
        elif verdict.certain is not None:  # a doubt (text/doubts.py) the evaluator's score cannot lift
            why = f"block [{claim.marker}] holds the sentence's words but may not say it"
        else:
            why = f"citation [{claim.marker}] does not support the sentence (support {verdict.support:.2f})"
        warn(f"{why}; {done}: {claim.sentence!r}")
        flagged.append(claim)
    return flagged
