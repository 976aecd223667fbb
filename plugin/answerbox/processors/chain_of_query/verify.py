"""SearChain's per-node decision: completion, correction, or pass (paper §3.3, Algorithm 1).

- unsolved query → **complete**: the reader's span g is fed back whatever its confidence f;
- f > θ and g not contained in the LLM's answer (normalised) → **correct**, unless the reader
  rates the LLM's answer, where the passage holds it, within ``answer_margin`` logits of g
  (``NodeEvidence.answer_gap``): then both are ways of saying the reference's answer and the
  node passes, verified (a right answer the reader would only have bounded differently, or
  one of two right answers, is not overridden);
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

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from answerbox.core.contract import ChainNodeReport, ChainSource, TextSpan
from answerbox.processors.chain_of_query.node_evidence import NodeEvidence
from answerbox.processors.chain_of_query.parser import ChainNode
from answerbox.processors.text.normalize import contains_answer
from answerbox.processors.text.words import terms

__all__ = ["Action", "NodeRecord", "NodeSupport", "ignored_corrections", "judge_node"]


class Action(StrEnum):
    PASS = "pass"
    CORRECT = "correct"
    COMPLETE = "complete"
    NOT_FOUND = "not_found"  # an unsolved query IR found no answer for


# Where a node's answer came from; one that kept the LLM's (a pass, or nothing found) has "llm".
_SOURCE: dict[Action, ChainSource] = {Action.CORRECT: "corrected", Action.COMPLETE: "completed"}


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

    def states_ir(self, content: str) -> bool:
        """Whether ``content`` states the answer IR gave this node (a correction or a completion):
        a word of it that the LLM's own answer lacks ("Toronto" states "Toronto, Ontario" over
        "Vancouver"; "2000 census" does not state "1990 census"). True for a node that kept the
        LLM's own answer, which the LLM wrote its content from."""
        if self.action not in (Action.CORRECT, Action.COMPLETE):
            return True
        distinct = terms(self.answer or "") - terms(self.llm_answer or "")
        return bool(distinct & terms(content)) if distinct else contains_answer(self.answer or "", content)

    def report(self) -> ChainNodeReport:
        span = self.evidence.span if self.evidence is not None else None
        return ChainNodeReport(
            round=self.round,
            query=self.query,
            llm_answer=self.llm_answer,
            reader_answer=span.text if span is not None else None,
            confidence=round(span.confidence, 4) if span is not None else None,
            answer=self.answer,
            source=_SOURCE.get(self.action, "llm"),
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
    answer_margin: float = 0.0,
) -> NodeRecord:
    span = evidence.span if evidence is not None and evidence.span.text else None
    sure = span if span is not None and span.confidence > theta else None  # a span IR is confident of
    reader_entailed = support is None or support.reader is True
    gap = evidence.answer_gap if evidence is not None else None
    # Without the verifier, the reader's own rating of the LLM's answer where the reference holds it.
    near = support is None and sure is not None and gap is not None and gap <= answer_margin
    if node.answer is None:
        action = Action.COMPLETE if span is not None else Action.NOT_FOUND
        verified = sure is not None and reader_entailed
    elif (support is not None and support.llm) or near:
        action, verified = Action.PASS, True
    elif sure is not None and not contains_answer(sure.text, node.answer):
        action, verified = Action.CORRECT, reader_entailed
    else:
        action = Action.PASS
        verified = support is None and sure is not None and contains_answer(sure.text, node.answer)
    return NodeRecord(
        round=round_, query=node.query, llm_answer=node.answer, evidence=evidence, action=action, verified=verified
    )


def ignored_corrections(content: str, path: Sequence[NodeRecord]) -> list[NodeRecord]:
    """The path's corrected nodes whose overridden LLM answer ``content`` states and whose
    correction it does not: a final content that contradicts what IR verified (an LLM that
    traced its own chain and ignored the feedback)."""
    return [
        r
        for r in path
        if r.action is Action.CORRECT
        and r.llm_answer
        and contains_answer(r.llm_answer, content)
        and not r.states_ir(content)
    ]
