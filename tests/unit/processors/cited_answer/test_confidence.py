"""``answer.confidence`` in process: what an answer's confidence rests on, abstention below
``min_confidence``, and the LLM asked only where it pays. The calibrator is the manifest's,
with coefficients simple enough to compute here; the LLM counts its calls, so "the LLM was not
asked" is checked, not assumed."""

from __future__ import annotations

import math
from typing import Any

import pytest
from answerbox.core.contract import Answer, Candidate
from answerbox.core.errors import ConfigError, LLMError
from answerbox.models import Models
from answerbox.pipeline.limits.request_limits import ConfigContext
from answerbox.processors.chain_of_query import ChainOfQuery
from answerbox.processors.retrieval_evaluator import RetrievalEvaluator

from tests.unit.fake_services import FakeEvaluator, FakeReader, FakeServices, Reply, fake_models
from tests.unit.fakes import responded, response_of
from tests.unit.processors.cited_answer.books import (
    ABSTAIN,
    AUTHOR_SIGNALS,
    HITS,
    answer_of,
    answer_services,
    answerer,
    cite,
    context,
    request,
    support,
)

GENERATED = "Frank Herbert wrote Dune [2]."
# confidence = sigmoid(2 · the snippet's score) for the reader's answer, sigmoid(3 · the best
# citation's support) for the LLM's; an answer needs 0.6, and a snippet above 0.95 skips the LLM.
CALIBRATOR = {
    "min_confidence": 0.6,
    "skip_llm_above": 0.95,
    "extractive": {
        "coefficients": {
            "score": 2.0,
            "margin": 0.0,
            "log_span_probability": 0.0,
            "log_covered_probability": 0.0,
            "over_no_answer": 0.0,
            "question_overlap": 0.0,
            "log_rank": 0.0,
            "log_words": 0.0,
            "agreement": 0.0,
            "span_probability_x_over_no_answer": 0.0,
        },
        "intercept": 0.0,
    },
    "generative": {"coefficients": {"support": 3.0, "snippet_confidence": 0.0, "agrees": 0.0}, "intercept": 0.0},
}


def sigmoid(z: float) -> float:
    return round(1 / (1 + math.exp(-z)), 4)


SNIPPET = sigmoid(2 * 0.8)  # the author's passage scores 0.8
LLM_ANSWER = sigmoid(3 * 0.8)  # citing the same passage


def _models(**calibrator: Any) -> Models:
    return fake_models(
        FakeReader(["Frank Herbert"]),
        FakeEvaluator(support),
        support_lower=-0.5,
        answer_confidence={**CALIBRATOR, **calibrator},
    )


def _services(*replies: Reply, **calibrator: Any) -> FakeServices:
    return answer_services(*(replies or (GENERATED,)), models=_models(**calibrator))


async def _answer(services: FakeServices, **config: Any) -> Answer:
    answer, _ = await answer_of(answerer(services, **{"prefer": "confident", **config}))
    return answer


async def test_an_extractive_answer_carries_its_confidence_and_what_it_rests_on() -> None:
    answer = await _answer(_services(), mode="extractive")
    assert answer == Answer(
        text="Frank Herbert",
        citations=[cite(2, "author", "Frank Herbert was an American science fiction author.", 0.8)],
        mode="extractive",
        confidence=SNIPPET,
        signals=AUTHOR_SIGNALS,
    )


async def test_below_min_confidence_the_answer_becomes_the_candidate() -> None:
    shown = await _answer(_services(), mode="extractive")
    assert shown.confidence == SNIPPET
    held = await _answer(_services(), mode="extractive", min_confidence=SNIPPET + 0.0001)
    assert held == Answer(
        text=ABSTAIN,
        mode="extractive",
        abstained=True,
        reason="low_confidence",
        candidate=Candidate(text=shown.text, citations=shown.citations, mode="extractive", confidence=SNIPPET),
        signals=shown.signals,
    )
    # At exactly its confidence it is answered: the threshold is inclusive.
    assert not (await _answer(_services(), mode="extractive", min_confidence=SNIPPET)).abstained


async def test_the_thresholds_default_to_the_calibrators() -> None:
    answered = await _answer(_services(), mode="extractive", min_confidence=None)
    held = await _answer(_services(min_confidence=0.9), mode="extractive", min_confidence=None)
    assert (answered.abstained, held.abstained, held.reason) == (False, True, "low_confidence")
    # Above the calibrator's skip_llm_above the snippet is the answer without the LLM.
    services = _services(skip_llm_above=SNIPPET)
    answer = await _answer(services, skip_llm_above=None)
    assert (answer.llm, services.llm.calls) == ("skipped", [])


async def test_every_abstention_says_why() -> None:
    services = _services()
    no_text = [{"_index": "books", "_id": "x", "_source": {"title": "Nothing about novels here."}}]
    none, _ = await answer_of(answerer(services), no_text)
    assert (none.abstained, none.reason, none.candidate) == (True, "no_evidence", None)
    # CRAG judges every hit below its lower threshold: incorrect, no strip kept, no evidence.
    ctx = context()
    crag = RetrievalEvaluator.from_dict({"lower": 0.99, "upper": 0.999, "corrective": None}, services, ConfigContext())
    assert isinstance(crag, RetrievalEvaluator)
    response = await responded(crag, request(), response_of(HITS), ctx)
    incorrect, _ = await answer_of(answerer(services), response["hits"]["hits"], ctx)
    assert ctx.report.retrieval is not None
    assert ctx.report.retrieval.verdict == "incorrect"
    assert incorrect == Answer(text=ABSTAIN, mode="generative", abstained=True, reason="retrieval_incorrect")


async def test_a_confident_snippet_skips_the_llm() -> None:
    services = _services()
    skipped = await _answer(services, skip_llm_above=0)
    assert services.llm.calls == []
    assert (skipped.llm, skipped.mode, skipped.confidence) == ("skipped", "extractive", SNIPPET)
    asked = await _answer(services, skip_llm_above=1)
    assert len(services.llm.calls) == 1
    # The LLM's held-up answer replaces the snippet only when it is more confident.
    assert (asked.llm, asked.mode, asked.confidence) == ("used", "generative", LLM_ANSWER)


async def test_a_less_confident_llm_answer_leaves_the_snippet() -> None:
    # Cited by the film's passage (support -0.2): held up, but less confident than the snippet.
    answer = await _answer(_services("Dune was adapted as a film [3]."), skip_llm_above=1)
    assert (answer.llm, answer.mode, answer.text, answer.confidence) == ("used", "extractive", "Frank Herbert", SNIPPET)


async def test_prefer_generative_keeps_the_llms_held_up_answer() -> None:
    services = _services("Dune was adapted as a film [3].")
    answer = await _answer(services, prefer="generative", skip_llm_above=1)
    assert len(services.llm.calls) == 1
    assert (answer.mode, answer.llm, answer.text) == ("generative", "used", "Dune was adapted as a film [3].")
    assert answer.confidence == sigmoid(3 * -0.2)
    # It does not say the snippet's "Frank Herbert".
    assert answer.signals == {"support": -0.2, "snippet_confidence": SNIPPET, "agrees": 0.0}


async def test_a_failed_llm_leaves_the_snippet_and_says_so() -> None:
    answer = await _answer(_services(LLMError("the LLM answered 500")), skip_llm_above=1)
    assert (answer.mode, answer.llm, answer.text) == ("extractive", "failed", "Frank Herbert")
    assert answer.confidence == SNIPPET


async def test_generative_mode_abstains_as_unsupported_when_no_claim_holds_up() -> None:
    answer = await _answer(_services("The moon is made of cheese [1]."), mode="generative")
    assert (answer.abstained, answer.reason, answer.llm) == (True, "unsupported", "used")
    assert [f.reason for f in answer.flagged] == ["unsupported"]


async def test_a_confident_reader_spares_the_chain_its_llm() -> None:
    services = _services()
    ctx = context()
    chain = ChainOfQuery.from_dict({"skip_llm_above": 0}, services, ConfigContext())
    assert isinstance(chain, ChainOfQuery)
    response = await responded(chain, request(), response_of(HITS), ctx)
    answer, _ = await answer_of(answerer(services, prefer="confident", skip_llm_above=0), response["hits"]["hits"], ctx)
    assert services.llm.calls == []
    assert (ctx.report.llm_skipped, ctx.report.chain) == (["chain_of_query"], None)
    assert (answer.llm, answer.text) == ("skipped", "Frank Herbert")
    asking = ChainOfQuery.from_dict({"skip_llm_above": 1, "r_max": 1}, services, ConfigContext())
    assert isinstance(asking, ChainOfQuery)
    again = context()
    await responded(asking, request(), response_of(HITS), again)
    assert (again.report.llm_skipped, again.report.chain is not None, len(services.llm.calls)) == ([], True, 1)


@pytest.mark.parametrize("field", ["min_confidence", "skip_llm_above"])
def test_the_thresholds_are_validated(field: str) -> None:
    with pytest.raises(ConfigError) as refused:
        answerer(_services(), **{field: 1.5})
    assert refused.value.reason.startswith(f"processor [cited_answer]: [{field}]")


async def test_an_index_correction_changes_the_numbers_not_which_answers_show() -> None:
    correction = {"scale": 0.5, "offset": -1.0}
    corrected = sigmoid(0.5 * (2 * 0.8) - 1.0)  # the shipped confidence's logit is 2 · 0.8
    answer = await _answer(_services(), mode="extractive", calibration=correction)
    assert (answer.abstained, answer.confidence) == (False, corrected)
    # The calibrator's min_confidence moved with it: still answered, though below 0.6 now.
    assert corrected < 0.6
    # A threshold set beside the correction is on its scale.
    held = await _answer(_services(), mode="extractive", calibration=correction, min_confidence=corrected + 0.0001)
    assert held.candidate is not None
    assert held.candidate.confidence == corrected
    # The LLM's answer reads the snippet's shipped confidence, as its calibrator was fitted to.
    services = _services("Dune was adapted as a film [3].")
    generated = await _answer(services, prefer="generative", skip_llm_above=1, calibration=correction)
    assert generated.signals is not None
    assert generated.signals["snippet_confidence"] == pytest.approx(SNIPPET, abs=1e-3)
    assert generated.confidence == sigmoid(0.5 * 3 * -0.2 - 1.0)


def test_a_correction_that_turns_the_order_around_is_refused() -> None:
    with pytest.raises(ConfigError) as refused:
        answerer(_services(), calibration={"scale": -1, "offset": 0})
    assert refused.value.reason.startswith("processor [cited_answer]: [calibration.scale]")


@pytest.mark.parametrize(("above", "skipped"), [(0.0, True), (0.0001, False)])
async def test_the_chain_reads_the_snippet_on_its_corrected_scale(above: float, skipped: bool) -> None:
    services = _services()
    correction = {"scale": 0.5, "offset": -1.0}
    corrected = sigmoid(0.5 * (2 * 0.8) - 1.0)
    chain = ChainOfQuery.from_dict(
        {"skip_llm_above": corrected + above, "r_max": 1, "calibration": correction}, services, ConfigContext()
    )
    assert isinstance(chain, ChainOfQuery)
    ctx = context()
    await responded(chain, request(), response_of(HITS), ctx)
    assert (ctx.report.llm_skipped == ["chain_of_query"], len(services.llm.calls)) == (skipped, 0 if skipped else 1)
