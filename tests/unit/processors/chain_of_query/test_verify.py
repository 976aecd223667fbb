"""SearChain's per-node decision, with and without the claim verifier's word on the reference."""

from __future__ import annotations

import pytest
from answerbox.models import ReaderSpan
from answerbox.processors.chain_of_query.entailment import content_entailed
from answerbox.processors.chain_of_query.node_evidence import NodeEvidence
from answerbox.processors.chain_of_query.parser import ChainNode
from answerbox.processors.chain_of_query.verify import Action, NodeRecord, NodeSupport, ignored_corrections, judge_node
from answerbox.processors.text.spans import Passage

from tests.unit.fake_services import FakeVerifier, fake_models

TEXT = "Super Bowl 50 was played at Levi's Stadium in Santa Clara."
SURE, UNSURE, THETA = 9.0, 1.0, 5.0


def _evidence(span: str, confidence: float, answer_gap: float | None = None) -> NodeEvidence:
    start = TEXT.index(span)
    span_read = ReaderSpan(span, start, start + len(span), confidence)
    return NodeEvidence(Passage("wiki", "d", "text", TEXT), span_read, answer_gap)


@pytest.mark.parametrize(
    ("answer", "span", "confidence", "support", "action", "verified", "kept"),
    [
        # The reader's rule alone (no verifier): as SearChain writes it.
        ("Santa Clara", "Santa Clara", SURE, None, Action.PASS, True, "Santa Clara"),
        ("New Orleans", "Santa Clara", SURE, None, Action.CORRECT, True, "Santa Clara"),
        (None, "Santa Clara", SURE, None, Action.COMPLETE, True, "Santa Clara"),
        ("Santa Clara", "Santa Clara", UNSURE, None, Action.PASS, False, "Santa Clara"),
        # With it: an answer the reference entails passes, verified, whatever span the reader prefers.
        ("Santa Clara, California", "Levi's Stadium", SURE, None, Action.CORRECT, True, "Levi's Stadium"),
        (
            "Santa Clara, California",
            "Levi's Stadium",
            SURE,
            NodeSupport(llm=True, reader=True),
            Action.PASS,
            True,
            "Santa Clara, California",
        ),
        # A correction the reference does not entail verifies nothing.
        (
            "New Orleans",
            "Santa Clara",
            SURE,
            NodeSupport(llm=False, reader=False),
            Action.CORRECT,
            False,
            "Santa Clara",
        ),
        ("New Orleans", "Santa Clara", SURE, NodeSupport(llm=False, reader=True), Action.CORRECT, True, "Santa Clara"),
        # An agreeing pass the reference does not entail is not verified either.
        ("Santa Clara", "Santa Clara", SURE, NodeSupport(llm=False, reader=False), Action.PASS, False, "Santa Clara"),
        (None, "Santa Clara", SURE, NodeSupport(llm=None, reader=False), Action.COMPLETE, False, "Santa Clara"),
    ],
)
def test_a_node_is_verified_by_its_reference(
    answer: str | None,
    span: str,
    confidence: float,
    support: NodeSupport | None,
    action: Action,
    verified: bool,
    kept: str,
) -> None:
    node = ChainNode("Where was Super Bowl 50 played?", answer)
    record = judge_node(node, _evidence(span, confidence), theta=THETA, round_=1, support=support)
    assert (record.action, record.verified, record.answer) == (action, verified, kept)


async def test_a_final_content_the_verified_references_do_not_entail_is_caught() -> None:
    def judge(evidence: str, claim: str) -> tuple[float, float]:
        return (0.9, 0.0) if "Santa Clara" in claim and "Santa Clara" in evidence else (0.05, 0.9)

    models = fake_models(verifier=FakeVerifier(judge))
    corrected = judge_node(
        ChainNode("Where was Super Bowl 50 played?", "New Orleans"),
        _evidence("Santa Clara", SURE),
        theta=THETA,
        round_=1,
        support=NodeSupport(llm=False, reader=True),
    )
    # The LLM kept its own answer in the final content, not the node's correction.
    assert await content_entailed(models, "Super Bowl 50 took place in New Orleans [1].", [corrected]) is False
    assert await content_entailed(models, "Super Bowl 50 was played in Santa Clara [1].", [corrected]) is True
    assert await content_entailed(fake_models(), "Super Bowl 50 took place in New Orleans [1].", [corrected]) is None


@pytest.mark.parametrize(
    ("gap", "confidence", "support", "action", "verified", "kept"),
    [
        (1.5, SURE, None, Action.PASS, True, "Levi's Stadium"),  # the reader rates it near its own span
        (2.5, SURE, None, Action.CORRECT, True, "Santa Clara"),  # too far below it
        (None, SURE, None, Action.CORRECT, True, "Santa Clara"),  # not in the window read
        (1.5, UNSURE, None, Action.PASS, False, "Levi's Stadium"),  # IR is not sure of the passage
        # With the verifier, entailment decides, not the reader's rating.
        (0.5, SURE, NodeSupport(llm=False, reader=True), Action.CORRECT, True, "Santa Clara"),
    ],
)
def test_an_answer_the_reader_rates_near_its_own_span_is_not_overridden(
    gap: float | None, confidence: float, support: NodeSupport | None, action: Action, verified: bool, kept: str
) -> None:
    node = ChainNode("Where was Super Bowl 50 played?", "Levi's Stadium")
    evidence = _evidence("Santa Clara", confidence, answer_gap=gap)
    record = judge_node(node, evidence, theta=THETA, round_=1, support=support, answer_margin=2.0)
    assert (record.action, record.verified, record.answer) == (action, verified, kept)


def test_a_final_content_that_states_a_corrected_answer_ignores_the_correction() -> None:
    wrong = ChainNode("Where was Super Bowl 50 played?", "New Orleans")
    corrected = judge_node(wrong, _evidence("Santa Clara", SURE), theta=THETA, round_=1)
    passed = judge_node(ChainNode("Who played?", "Denver"), _evidence("Santa Clara", SURE), theta=THETA, round_=1)
    path: list[NodeRecord] = [corrected, passed]
    assert ignored_corrections("It was played in New Orleans [1].", path) == [corrected]
    assert ignored_corrections("It was played in Santa Clara [1], not New Orleans.", path) == []
    assert ignored_corrections("It was played in California [1].", path) == []
