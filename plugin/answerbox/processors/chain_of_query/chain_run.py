"""One SearChain run for one search: rounds of Chain-of-Query and IR feedback, then tracing.

Each round the LLM writes a whole chain; IR checks its nodes in order, skipping queries
already processed, and only the first failing node gets feedback (Algorithm 1). The
conversation grows by the chain and the feedback, so the LLM rewrites the chain from the
point IR changed: each chain is a new branch of the Tree-of-Reasoning under the node
that got feedback. A round whose output holds no chain at all (small models) searches the
question itself as an unsolved query, so IR can still complete it. The run stops when a
chain passes, after ``r_max`` rounds, or when the wall-clock budget is spent; then the
final content is the passing chain's own, or the tracing prompt's over the recorded nodes.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from enum import StrEnum

from answerbox.core.contract import BranchFeedback, BranchParent, BranchReport, DraftNode, LLMUsageReport
from answerbox.core.errors import LLMError, ModelError, OutOfScope, UpstreamError, UpstreamUnavailable
from answerbox.llm.client import Completion, Message
from answerbox.llm.structured import Schema
from answerbox.pipeline.caller_scope.scope import ScopedSearch
from answerbox.pipeline.run.deadline import Deadline
from answerbox.processors.chain_of_query.config import ChainOfQueryConfig
from answerbox.processors.chain_of_query.entailment import node_supports
from answerbox.processors.chain_of_query.node_evidence import gather_evidence, reference_excerpt
from answerbox.processors.chain_of_query.parser import (
    CHAIN_SCHEMA,
    FINAL_CONTENT_SCHEMA,
    ChainNode,
    ParsedChain,
    read_chain,
)
from answerbox.processors.chain_of_query.verify import Action, NodeRecord, judge_node
from answerbox.processors.text.normalize import normalize_answer
from answerbox.services import Services

__all__ = ["ChainRun", "RunResult", "Stop"]

_TEMPLATES = "chain_of_query/"
_FEEDBACK = {Action.CORRECT: "correction.j2", Action.COMPLETE: "completion.j2", Action.NOT_FOUND: "not_found.j2"}
# The paper's examples put "If you know the answer:" right after an [Unsolved Query] line:
# stopping there ends the chain at the unsolved query, as SearChain's generation does.
# A new "[Question]" line is the LLM inventing a next example.
_COQ_STOP = ("If you know the answer", "\n[Question]")


class Stop(StrEnum):
    FINISHED = "finished"  # a chain passed every node
    ROUNDS = "rounds"  # r_max rounds without a passing chain
    BUDGET = "budget"  # the wall-clock budget ran out
    FAILED = "failed"  # the LLM, the reader or a search failed


@dataclass(kw_only=True)
class Branch:
    """One chain of the Tree-of-Reasoning; ``parent`` is the (round, node) whose feedback it answers."""

    round: int
    parent: tuple[int, int] | None
    chain: ParsedChain
    malformed: bool  # the LLM wrote no chain: ``chain`` is the question as an unsolved query
    cut_off: bool  # the reply ran into max_tokens
    feedback: tuple[int, Action] | None = None

    def report(self) -> BranchReport:
        return BranchReport(
            round=self.round,
            parent=BranchParent(round=self.parent[0], node=self.parent[1]) if self.parent else None,
            nodes=[DraftNode(query=n.query, answer=n.answer, unsolved=n.unsolved) for n in self.chain.nodes],
            final_content=self.chain.final_content,
            malformed=self.malformed,
            cut_off=self.cut_off,
            feedback=BranchFeedback(node=self.feedback[0], action=self.feedback[1].value) if self.feedback else None,
        )


@dataclass(kw_only=True)
class RunResult:
    """The run's state as it goes, and its result at the end."""

    records: list[NodeRecord] = field(default_factory=list)  # every processed node, in order
    tree: list[Branch] = field(default_factory=list)
    path: list[NodeRecord] = field(default_factory=list)  # marker [k] of the final content cites path[k - 1]
    final_content: str | None = None
    stopped: Stop = Stop.ROUNDS
    usage: LLMUsageReport = field(default_factory=LLMUsageReport)
    warnings: list[str] = field(default_factory=list)


def _tokens(query: str) -> frozenset[str]:
    return frozenset(normalize_answer(query).split())


# How far past the chain's deadline an LLM call's own timeout is set (see _llm_timeout).
_PAST_DEADLINE_S = 1.0


@dataclass(kw_only=True)
class ChainRun:
    """``index`` is where nodes are checked, ``theta`` the reader's gate and ``answer_margin``
    its margin for an LLM's answer, all resolved (the config's, else the search's index and
    the manifest's); ``llm_timeout_s`` is each LLM call's own timeout, as the run plan
    resolved it."""

    services: Services
    config: ChainOfQueryConfig
    index: str | None
    theta: float
    answer_margin: float
    search: ScopedSearch
    question: str
    deadline: Deadline
    llm_timeout_s: float
    _result: RunResult = field(default_factory=RunResult, init=False)
    _structured: bool = field(default=False, init=False)  # the LLM is asked for JSON (set before round 1)

    async def run(self) -> RunResult:
        try:
            async with asyncio.timeout(self.deadline.left()):
                await self._rounds()
                await self._trace()
        except TimeoutError:
            self._fail(
                Stop.BUDGET, f"the time budget of {self.deadline.seconds:g}s ran out in round {len(self._result.tree)}"
            )
        except LLMError as exc:
            self._fail(Stop.FAILED, f"the LLM failed: {exc.reason}")
        except (ModelError, UpstreamError, UpstreamUnavailable, OutOfScope) as exc:
            self._fail(Stop.FAILED, f"verifying the chain failed: {exc.reason}")
        return self._result

    def _fail(self, stop: Stop, reason: str) -> None:
        self._result.stopped = stop
        self._result.final_content = None
        self._result.path = []
        self._result.warnings.append(f"{reason}; nothing unverified is presented as verified")

    async def _rounds(self) -> None:
        self._structured = await self.services.llm.structured(timeout_s=self._llm_timeout())
        prompt = await self.services.prompts.get(_TEMPLATES + "coq.j2").arender(
            question=self.question, json=self._structured
        )
        messages: list[Message] = [{"role": "user", "content": prompt}]
        parent: tuple[int, int] | None = None
        for round_ in range(1, self.config.r_max + 1):
            # A JSON reply is bounded by its schema, and the stop strings could cut it inside a string.
            reply = await self._complete(messages, None if self._structured else _COQ_STOP, CHAIN_SCHEMA)
            chain = read_chain(reply.text, self._structured)
            if chain.empty:
                # A model that writes no chain does not know the answer: the question itself
                # becomes its unsolved query, so IR can still complete it.
                self._result.warnings.append(
                    f"round {round_}: the LLM wrote no [Query] and no [Final Content]; "
                    "the question was searched as an unsolved query"
                )
            question_only = ParsedChain(nodes=(ChainNode(self.question, None),), final_content=None)
            branch = Branch(
                round=round_,
                parent=parent,
                chain=question_only if chain.empty else chain,
                malformed=chain.empty,
                cut_off=reply.cut_off,
            )
            self._result.tree.append(branch)
            failing = await self._traverse(branch.chain, round_)
            if failing is None:
                self._result.stopped = Stop.FINISHED
                self._result.path = [r for r in (self._processed(n.query) for n in branch.chain.nodes) if r is not None]
                self._result.final_content = branch.chain.final_content
                return
            position, record = failing
            branch.feedback = (position, record.action)
            messages += [
                {"role": "assistant", "content": reply.text},
                {"role": "user", "content": await self._feedback(record)},
            ]
            parent = (round_, position)

    async def _traverse(self, chain: ParsedChain, round_: int) -> tuple[int, NodeRecord] | None:
        """Check the chain's new nodes in order; the first that needs feedback, or None if all pass."""
        fresh: list[int] = []
        for position, node in enumerate(chain.nodes):
            if self._processed(node.query) is None and not any(
                self._same(node.query, chain.nodes[p].query) for p in fresh
            ):
                fresh.append(position)
        nodes = [chain.nodes[p] for p in fresh]
        evidence = await gather_evidence(
            self.services, self.search, index=self.index, field=self.config.text_field, nodes=nodes
        )
        supports = await node_supports(await self.services.models(), nodes, evidence)
        for position, found, support in zip(fresh, evidence, supports, strict=True):
            record = judge_node(
                chain.nodes[position],
                found,
                theta=self.theta,
                round_=round_,
                support=support,
                answer_margin=self.answer_margin,
            )
            self._result.records.append(record)
            if record.action is not Action.PASS:
                return position, record
        return None

    def _same(self, a: str, b: str) -> bool:
        """Duplicate queries: the same normalised words, or a token overlap (Jaccard) at the configured level."""
        ta, tb = _tokens(a), _tokens(b)
        if ta == tb:
            return True
        return bool(ta | tb) and len(ta & tb) / len(ta | tb) >= self.config.duplicate_overlap

    def _processed(self, query: str) -> NodeRecord | None:
        return next((r for r in self._result.records if self._same(r.query, query)), None)

    async def _feedback(self, record: NodeRecord) -> str:
        reference = reference_excerpt(record.evidence, self.config.max_reference_chars) if record.evidence else ""
        return await self.services.prompts.get(_TEMPLATES + _FEEDBACK[record.action]).arender(
            query=record.query, answer=record.answer or "", question=self.question, reference=reference
        )

    async def _trace(self) -> None:
        """The tracing prompt, when no chain wrote its own final content: over the passing chain's
        nodes, or, when rounds ran out, over every recorded node that has an answer."""
        if self._result.final_content is not None:
            return
        steps = [
            r
            for r in (self._result.path if self._result.stopped is Stop.FINISHED else self._result.records)
            if r.answer
        ]
        if not steps:
            return
        prompt = await self.services.prompts.get(_TEMPLATES + "tracing.j2").arender(
            question=self.question,
            steps=[{"query": r.query, "answer": r.answer} for r in steps],
            json=self._structured,
        )
        text = (await self._complete([{"role": "user", "content": prompt}], None, FINAL_CONTENT_SCHEMA)).text
        self._result.path = steps
        # Unmarked text is the final content, but never a JSON reply that did not parse.
        unmarked = None if self._structured else text.strip() or None
        self._result.final_content = read_chain(text, self._structured).final_content or unmarked

    def _llm_timeout(self) -> float:
        # The LLM's own timeout still applies; past the chain's deadline, the run's own timeout
        # cuts the call (and names the budget as the cause), not the LLM client's.
        return min(self.llm_timeout_s, self.deadline.left() + _PAST_DEADLINE_S)

    async def _complete(self, messages: list[Message], stop: tuple[str, ...] | None, schema: Schema) -> Completion:
        completion = await self.services.llm.complete(
            messages,
            max_tokens=self.config.max_tokens,
            stop=stop,
            timeout_s=self._llm_timeout(),
            schema=schema if self._structured else None,
        )
        self._result.usage.add(
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            millis=completion.millis,
        )
        return completion
