"""SearChain's per-node decision: completion, correction, or pass (paper §3.3, Algorithm 1).

- unsolved query → **complete**: the reader's span g is fed back whatever its confidence f;
- f > θ and g not contained in the LLM's answer (normalised) → **correct**;
- otherwise the node **passes** with the LLM's answer.

Every node keeps the hit that was read for it. A node is *verified* only when that hit
supports its answer: the reader found a span with f > θ, and the span is the answer (a
correction) or stands in it (an agreeing pass). A pass with low confidence, and a
completion with low confidence, stay unverified: IR was not sure, and the report says so.

With the claim verifier (``NodeSupport``), "supports" means *entails*: a node is verified only
when its reference entails "the answer to the query is <the node's answer>". An LLM answer the
reference entails passes, verified, whatever span the reader prefers (the reader's span is one
way of saying it, not the only one); a reader's span the reference does not entail verifies
nothing, correction or completion alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from answerbox.core.contract import ChainNodeReport, ChainSource, TextSpan
from answerbox.processors.chain_of_query.node_evidence import NodeEvidence
from answerbox.processors.chain_of_query.parser import ChainNode
from answerbox.processors.text.normalize import contains_answer

__all__ = ["Action", "NodeRecord", "NodeSupport", "judge_node"]


class Action(StrEnum):
    PASS = "pass"
    CORRECT = "correct"
    COMPLETE = "complete"
    NOT_FOUND = "not_found"  # an unsolved query IR found no answer for


_SOURCE: dict[Action, ChainSource] = {
    Action.PASS: "llm",
    Action.CORRECT: "corrected",
    Action.COMPLETE: "completed",
    Action.NOT_FOUND: "llm",
}


@dataclass(frozen=True, slots=True)
class NodeSupport:
    """Whether the node's reference entails its LLM answer and the reader's span, as answers to
    its query (None: there is none to judge)."""

    llm: bool | None
    reader: bool | None


@dataclass(frozen=True, kw_only=True)
class NodeRecord:
    """One processed node: what the LLM said, what IR read, and the answer the chain keeps."""

    round: int
    query: str
    llm_answer: str | None
    evidence: NodeEvidence | None
    action: Action
    verified: bool

    @property
    def answer(self) -> str | None:
        if self.action in (Action.CORRECT, Action.COMPLETE) and self.evidence is not None:
            return self.evidence.span.text
        return self.llm_answer

    def report(self) -> ChainNodeReport:
        span = self.evidence.span if self.evidence is not None else None
        return ChainNodeReport(
            round=self.round,
            query=self.query,
            llm_answer=self.llm_answer,
            reader_answer=span.text if span is not None else None,
            confidence=round(span.confidence, 4) if span is not None else None,
            answer=self.answer,
            source=_SOURCE[self.action],
            action=self.action.value,
            verified=self.verified,
            reference=self.evidence.found.wire(TextSpan) if self.evidence is not None else None,
        )


def judge_node(
    node: ChainNode,
    evidence: NodeEvidence | None,
    *,
    theta: float,
    round_: int,
    support: NodeSupport | None = None,
) -> NodeRecord:
    span = evidence.span if evidence is not None and evidence.span.text else None
    reader_entailed = support is None or support.reader is True
    if node.answer is None:
        action = Action.COMPLETE if span is not None else Action.NOT_FOUND
        verified = span is not None and span.confidence > theta and reader_entailed
    elif support is not None and support.llm:
        action, verified = Action.PASS, True
    elif span is not None and span.confidence > theta and not contains_answer(span.text, node.answer):
        action, verified = Action.CORRECT, reader_entailed
    else:
        action = Action.PASS
        verified = (
            support is None and span is not None and span.confidence > theta and contains_answer(span.text, node.answer)
        )
    return NodeRecord(
        round=round_, query=node.query, llm_answer=node.answer, evidence=evidence, action=action, verified=verified
    )
