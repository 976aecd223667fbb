"""The answer policy: one row per rule of ``policy``'s table, the answer
chosen from a reader's snippet and an LLM's checked answer with no services at all."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest
from answerbox.core.contract import Answer, Candidate, FlaggedClaim
from answerbox.models.confidence import AnswerCalibrator
from answerbox.pipeline.base import Planning
from answerbox.processors.answering.policy import (
    AnswerPlan,
    AnswerPolicy,
    AnswerRules,
    answer_plan,
    asks_llm,
    choose,
)
from answerbox.services import Services

ABSTAIN = "No answer."
SNIPPET = "Frank Herbert"
GENERATED = "Frank Herbert wrote Dune [2]."
FLAG = FlaggedClaim(sentence="The moon is made of cheese.", marker=1, reason="unsupported", support=-0.9)
# Every row's thresholds unless it says otherwise: an answer needs 0.5, a snippet at 0.9 skips the LLM.
THRESHOLDS: dict[str, Any] = {"min_confidence": 0.5, "skip_llm_above": 0.9}


def policy(**given: Any) -> AnswerPolicy:
    return AnswerPolicy(**{"mode": "auto", "prefer": "confident", "abstain_text": ABSTAIN, **THRESHOLDS, **given})


def snippet(confidence: float) -> Answer:
    return Answer(text=SNIPPET, mode="extractive", confidence=confidence, signals={"score": 0.8})


def generated(confidence: float) -> Answer:
    return Answer(text=GENERATED, mode="generative", confidence=confidence, llm="used", signals={"support": 0.8})


# The LLM's answer with no claim held up: the check's abstention, its removed claim flagged.
UNSUPPORTED = Answer(text=ABSTAIN, mode="generative", abstained=True, reason="unsupported", llm="used", flagged=[FLAG])

ROWS = [
    # mode, prefer; the snippet, the LLM's answer (None: not asked or failed); asked, then the answer's
    # (mode, text, abstained, reason, llm, flagged).
    pytest.param(
        policy(mode="extractive"),
        snippet(0.95),
        None,
        False,
        ("extractive", SNIPPET, False, None, None, []),
        id="extractive: the snippet, however confident",
    ),
    pytest.param(
        policy(mode="extractive"),
        None,
        None,
        False,
        ("extractive", ABSTAIN, True, "unsupported", None, []),
        id="extractive: no snippet abstains unsupported",
    ),
    pytest.param(
        policy(mode="extractive"),
        snippet(0.4),
        None,
        False,
        ("extractive", ABSTAIN, True, "low_confidence", None, []),
        id="extractive: below min_confidence abstains",
    ),
    pytest.param(
        policy(),
        snippet(0.9),
        None,
        False,
        ("extractive", SNIPPET, False, None, "skipped", []),
        id="auto confident: snippet at skip_llm_above skips the LLM",
    ),
    pytest.param(
        policy(min_confidence=0.95),
        snippet(0.9),
        None,
        False,
        ("extractive", ABSTAIN, True, "low_confidence", "skipped", []),
        id="auto confident: a skipping snippet below min_confidence abstains",
    ),
    pytest.param(
        policy(),
        snippet(0.8),
        generated(0.85),
        True,
        ("generative", GENERATED, False, None, "used", []),
        id="auto confident: snippet below skip, the more confident LLM answers",
    ),
    pytest.param(
        policy(),
        snippet(0.8),
        generated(0.7),
        True,
        ("extractive", SNIPPET, False, None, "used", []),
        id="auto confident: snippet below skip, the less confident LLM leaves the snippet",
    ),
    pytest.param(
        policy(),
        snippet(0.8),
        generated(0.8),
        True,
        ("extractive", SNIPPET, False, None, "used", []),
        id="auto confident: a tie leaves the snippet",
    ),
    pytest.param(
        policy(prefer="generative"),
        snippet(0.95),
        generated(0.6),
        True,
        ("generative", GENERATED, False, None, "used", []),
        id="auto generative: asked above skip, the held-up LLM answers though less confident",
    ),
    pytest.param(
        policy(),
        snippet(0.8),
        UNSUPPORTED,
        True,
        ("extractive", SNIPPET, False, None, "used", [FLAG]),
        id="auto: nothing of the LLM's held up, the snippet with its flags",
    ),
    pytest.param(
        policy(prefer="generative"),
        snippet(0.8),
        UNSUPPORTED,
        True,
        ("extractive", SNIPPET, False, None, "used", [FLAG]),
        id="auto generative: nothing of the LLM's held up, the snippet with its flags",
    ),
    pytest.param(
        policy(),
        None,
        generated(0.6),
        True,
        ("generative", GENERATED, False, None, "used", []),
        id="auto: no snippet, the LLM answers",
    ),
    pytest.param(
        policy(),
        None,
        UNSUPPORTED,
        True,
        ("generative", ABSTAIN, True, "unsupported", "used", [FLAG]),
        id="auto: no snippet, nothing of the LLM's held up abstains",
    ),
    pytest.param(
        policy(),
        snippet(0.8),
        None,
        True,
        ("extractive", SNIPPET, False, None, "failed", []),
        id="auto: the LLM failed, the snippet",
    ),
    pytest.param(
        policy(),
        None,
        None,
        True,
        ("generative", ABSTAIN, True, "unavailable", "failed", []),
        id="auto: the LLM failed, no snippet abstains unavailable",
    ),
    pytest.param(
        policy(),
        snippet(0.4),
        generated(0.45),
        True,
        ("generative", ABSTAIN, True, "low_confidence", "used", []),
        id="auto: the chosen LLM answer below min_confidence abstains",
    ),
    pytest.param(
        policy(mode="generative"),
        snippet(0.95),
        generated(0.6),
        True,
        ("generative", GENERATED, False, None, "used", []),
        id="generative: asked above skip, the LLM answers though less confident",
    ),
    pytest.param(
        policy(mode="generative"),
        snippet(0.8),
        UNSUPPORTED,
        True,
        ("generative", ABSTAIN, True, "unsupported", "used", [FLAG]),
        id="generative: nothing of the LLM's held up abstains, the snippet aside",
    ),
    pytest.param(
        policy(mode="generative"),
        snippet(0.8),
        None,
        True,
        ("extractive", SNIPPET, False, None, "failed", []),
        id="generative: the LLM failed, the snippet",
    ),
    pytest.param(
        policy(mode="generative"),
        None,
        generated(0.4),
        True,
        ("generative", ABSTAIN, True, "low_confidence", "used", []),
        id="generative: below min_confidence abstains",
    ),
]


@pytest.mark.parametrize(("rules", "reader", "llm", "asked", "expected"), ROWS)
def test_every_rule_of_the_table(
    rules: AnswerPolicy,
    reader: Answer | None,
    llm: Answer | None,
    asked: bool,
    expected: tuple[str, str, bool, str | None, str | None, list[FlaggedClaim]],
) -> None:
    assert asks_llm(reader, rules) is asked
    answer = choose(reader, llm, rules)
    assert (answer.mode, answer.text, answer.abstained, answer.reason, answer.llm, answer.flagged) == expected
    # An abstention below min_confidence keeps the answer it held back; no other has a candidate.
    assert (answer.candidate is not None) == (answer.reason == "low_confidence")


def test_below_min_confidence_the_answer_is_the_candidate() -> None:
    held = choose(snippet(0.8), generated(0.85), policy(min_confidence=0.9))
    assert held == Answer(
        text=ABSTAIN,
        mode="generative",
        abstained=True,
        reason="low_confidence",
        llm="used",
        candidate=Candidate(text=GENERATED, mode="generative", confidence=0.85),
        signals={"support": 0.8},
    )
    # The threshold is inclusive: at exactly min_confidence the answer is answered.
    assert choose(snippet(0.5), None, policy(mode="extractive")) == snippet(0.5)


def test_an_answer_the_llm_was_not_asked_for_is_not_read() -> None:
    assert choose(snippet(0.9), generated(0.99), policy()).text == SNIPPET
    assert choose(snippet(0.6), generated(0.99), policy(mode="extractive")).text == SNIPPET


@pytest.mark.parametrize(
    ("given", "expected"),
    [((None, None), (0.6, 0.95)), ((0.0, 1.0), (0.0, 1.0))],
    ids=["the calibrator's", "the pipeline's"],
)
async def test_a_threshold_the_pipeline_sets_wins(
    given: tuple[float | None, float | None], expected: tuple[float, float]
) -> None:
    manifest = SimpleNamespace(answer_calibrator=AnswerCalibrator(min_confidence=0.6, skip_llm_above=0.95))

    async def models() -> SimpleNamespace:
        return SimpleNamespace(manifest=manifest)

    rules = AnswerRules(min_confidence=given[0], skip_llm_above=given[1])
    resolved = (
        await answer_plan(AnswerPlan, rules, cast(Services, SimpleNamespace(models=models)), Planning())
    ).policy(ABSTAIN)
    assert (resolved.min_confidence, resolved.skip_llm_above) == expected
