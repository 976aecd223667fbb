"""Which answer a step that answers returns: the reader's snippet, the LLM's checked answer, or an abstention.
The processors (``cited_answer``, ``chain_of_query``) gather the answers; these pure functions choose.

==========  ===================================================  =============================================
mode        when                                                 the answer
==========  ===================================================  =============================================
extractive  (also: no LLM configured)                            the snippet; none: abstains ``unsupported``
auto        prefer confident, snippet ≥ ``skip_llm_above``       the snippet, ``llm: skipped`` (LLM not asked)
auto, gen.  the LLM failed                                       the snippet, ``llm: failed``; none: abstains
                                                                 ``unavailable``
generative  the LLM answered                                     its answer (abstains ``unsupported`` when no
                                                                 claim held up)
auto        the LLM answered, no snippet                         the LLM's answer
auto        no claim of the LLM's held up                        the snippet, ``llm: used``, with its flags
auto        prefer generative, or the LLM's more confident       the LLM's answer
auto        otherwise (the snippet at least as confident)        the snippet, ``llm: used``
any         confidence < ``min_confidence``                      abstains ``low_confidence``, the answer kept
                                                                 as ``candidate``
==========  ===================================================  =============================================
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeGuard, TypeVar

from pydantic import Field

from answerbox.core.contract import Answer, AnswerMode, AnswerReason, Candidate, FlaggedClaim, LLMUse, PlanSource
from answerbox.core.errors import ModelError
from answerbox.models.confidence import AnswerCalibrator, Recalibration
from answerbox.pipeline.base import Planning, ProcessorConfig, Sourced, StepPlan

if TYPE_CHECKING:
    from answerbox.services import Services

__all__ = ["AnswerPlan", "AnswerPolicy", "AnswerRules", "abstention", "answer_plan", "asks_llm", "choose", "gate"]

Mode = Literal["auto", "generative", "extractive"]
Prefer = Literal["confident", "generative"]


class AnswerRules(ProcessorConfig):
    """The config of a step that may answer (``cited_answer``, ``chain_of_query``); the pipeline's
    ``answer`` section sets its rules once for all such steps (``pipeline/catalogue/registry.py``)."""

    # Below it the answer abstains; None: the model's, fitted for 85% precision.
    min_confidence: float | None = Field(default=None, ge=0, le=1)
    # The reader's answer this confident is the answer: no LLM, no chain; None: the model's (shipped: 0).
    skip_llm_above: float | None = Field(default=None, ge=0, le=1)
    # This index's correction of the shipped confidence (``answerbox threshold`` fits it); the
    # thresholds above are then on the corrected scale, and the model's defaults move with it.
    calibration: Recalibration | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerPlan(StepPlan):
    """The answer rules a step runs with, its calibrator resolved (not shown: its source is the model)."""

    min_confidence: Sourced[float]
    skip_llm_above: Sourced[float]
    calibration: Sourced[Recalibration] | None = None
    calibrator: AnswerCalibrator
    answers: bool = False  # whether its answer is the search's (the run plan's ``answer``)

    def policy(self, abstain_text: str, mode: Mode = "auto", prefer: Prefer = "confident") -> AnswerPolicy:
        return AnswerPolicy(mode, prefer, self.min_confidence.value, self.skip_llm_above.value, abstain_text)


A = TypeVar("A", bound=AnswerPlan)


async def answer_plan(kind: type[A], rules: AnswerRules, services: Services, planning: Planning, **more: Any) -> A:
    """A ``kind`` of plan with ``more`` and ``rules`` resolved: a threshold the pipeline sets wins; an unset one is the
    model's (its manifest's, moved by the index's correction)."""
    try:
        calibrator = (await services.models()).manifest.answer_calibrator.for_index(rules.calibration)
    except ModelError:
        calibrator = AnswerCalibrator().for_index(rules.calibration)  # the reader is unavailable too: it says so
    fitted: PlanSource = "calibration" if rules.calibration is not None else "manifest"
    given, skip = rules.min_confidence, rules.skip_llm_above
    return kind(
        **more,
        answers=planning.answers,
        min_confidence=rules.sourced("min_confidence", calibrator.min_confidence if given is None else given, fitted),
        skip_llm_above=rules.sourced("skip_llm_above", calibrator.skip_llm_above if skip is None else skip, fitted),
        calibration=Sourced(rules.calibration, "pipeline") if rules.calibration is not None else None,
        calibrator=calibrator,
    )


@dataclass(frozen=True, slots=True)
class AnswerPolicy:
    """A pipeline's answer rules, its thresholds resolved (``resolved``)."""

    mode: Mode
    prefer: Prefer
    min_confidence: float
    skip_llm_above: float
    abstain_text: str


def asks_llm(snippet: Answer | None, policy: AnswerPolicy) -> bool:
    """Whether the LLM is asked, the reader's scored ``snippet`` (None: none) in hand."""
    return policy.mode != "extractive" and not _answers_alone(snippet, policy)


def choose(snippet: Answer | None, generated: Answer | None, policy: AnswerPolicy) -> Answer:
    """The answer the search returns. ``generated`` is the LLM's checked and scored answer,
    None when the LLM failed; it is not read where ``asks_llm`` says the LLM is not asked."""
    return gate(_chosen(snippet, generated, policy), policy)


def gate(answer: Answer, policy: AnswerPolicy) -> Answer:
    """``answer`` when it is confident enough (inclusive), else an abstention holding it as the
    candidate: a page may still show it as a possible answer."""
    if answer.abstained or answer.confidence is None or answer.confidence >= policy.min_confidence:
        return answer
    candidate = Candidate(text=answer.text, citations=answer.citations, mode=answer.mode, confidence=answer.confidence)
    held = abstention(policy.abstain_text, answer.mode, "low_confidence", llm=answer.llm, flagged=answer.flagged)
    return held.model_copy(update={"candidate": candidate, "signals": answer.signals})


def abstention(
    text: str,
    mode: AnswerMode,
    reason: AnswerReason,
    *,
    llm: LLMUse | None = None,
    flagged: Sequence[FlaggedClaim] = (),
) -> Answer:
    return Answer(text=text, mode=mode, abstained=True, reason=reason, llm=llm, flagged=list(flagged))


def _answers_alone(snippet: Answer | None, policy: AnswerPolicy) -> TypeGuard[Answer]:
    """The snippet is the answer without the LLM: above ``skip_llm_above`` the LLM stops adding
    right answers, unless the pipeline prefers the LLM's text whenever it holds up."""
    return (
        policy.mode == "auto"
        and policy.prefer == "confident"
        and snippet is not None
        and snippet.confidence is not None
        and snippet.confidence >= policy.skip_llm_above
    )


def _chosen(snippet: Answer | None, generated: Answer | None, policy: AnswerPolicy) -> Answer:
    if policy.mode == "extractive":
        return snippet if snippet is not None else abstention(policy.abstain_text, "extractive", "unsupported")
    if _answers_alone(snippet, policy):
        return snippet.model_copy(update={"llm": "skipped"})
    if generated is None:  # the LLM failed: the snippet, whatever the mode
        if snippet is None:
            return abstention(policy.abstain_text, "generative", "unavailable", llm="failed")
        return snippet.model_copy(update={"llm": "failed"})
    if policy.mode == "generative" or snippet is None:
        return generated
    if generated.abstained:  # the snippet answers; the claims the check removed stay reported
        return snippet.model_copy(update={"llm": "used", "flagged": generated.flagged})
    if policy.prefer == "generative" or (generated.confidence or 0.0) > (snippet.confidence or 0.0):
        return generated
    return snippet.model_copy(update={"llm": "used"})
