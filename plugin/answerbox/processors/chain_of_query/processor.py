"""``chain_of_query``: SearChain (Xu et al., WWW'24) as a search response processor.

The LLM plans a Chain-of-Query for the search's question; every node is checked against
the top-1 hit of its own query (same index, the caller's credentials, the caller's
filters) by the ONNX reader; IR's corrections and completions go back to the LLM for at
most ``r_max`` rounds within ``budget_s``. The result goes to ``ext.answerbox.chain``:
rounds, the checked nodes, the Tree-of-Reasoning, and the final content whose ``[k]``
markers cite the hit that supported node k. The hits themselves are never changed, and
an LLM, model or search failure only degrades the chain (a warning, an abstention), as does
a refused search: another ``index`` is not searched for a caller whose target is a filtered
or routed alias (``ScopedSearch``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from answerbox.core.contract import Answer, ChainCitation, ChainReport, Citation, PassagePiece
from answerbox.core.errors import ModelError
from answerbox.models.confidence import signals_record
from answerbox.pipeline.base import JSON, PipelineContext, Planning, ResponseProcessor, SearchRequest, Sourced, StepPlan
from answerbox.processors.answering.evidence import (
    EVIDENCE_SIZE,
    READING_CHARS,
    SNIPPET_CHARS,
    EvidenceFields,
    answer_evidence,
    evidence_from_references,
    in_context,
)
from answerbox.processors.answering.extractive import beside_the_snippet, featured_snippet
from answerbox.processors.answering.policy import AnswerPlan, abstention, answer_plan, asks_llm, gate
from answerbox.processors.chain_of_query.chain_run import ChainRun, RunResult
from answerbox.processors.chain_of_query.config import ChainOfQueryConfig
from answerbox.processors.chain_of_query.entailment import content_entailed
from answerbox.processors.chain_of_query.parser import citation_markers, final_answer
from answerbox.processors.chain_of_query.verify import NodeRecord, ignored_corrections
from answerbox.processors.text.normalize import contains_answer
from answerbox.processors.text.passages import hits_of
from answerbox.processors.text.spans import Span

if TYPE_CHECKING:
    from answerbox.models import Models

__all__ = ["ChainOfQuery", "ChainOfQueryConfig", "ChainPlan"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ChainPlan(AnswerPlan):
    budget_s: Sourced[float]
    llm_timeout_s: Sourced[float]
    # The reader's constants: the pipeline's, else the model's; None: the model did not load.
    theta: Sourced[float] | None = None
    answer_margin: Sourced[float] | None = None


class ChainOfQuery(ResponseProcessor[ChainOfQueryConfig]):
    type_name = "chain_of_query"
    uses_models = True
    config_model = ChainOfQueryConfig
    budget_weight = 3.0
    writes_answer = True

    def writes_from_knowledge(self, plan: StepPlan) -> bool:
        return False  # its LLM writes from the references its own searches find

    async def plan(self, planning: Planning) -> ChainPlan:
        config = self.config
        constants: dict[str, Sourced[float]] = {}
        try:
            manifest = (await self.services.models()).manifest
            theta, margin = config.theta, config.answer_margin
            constants["theta"] = config.sourced("theta", manifest.theta if theta is None else theta, "manifest")
            margin = manifest.chain_answer_margin if margin is None else margin
            constants["answer_margin"] = config.sourced("answer_margin", margin, "manifest")
        except ModelError:
            pass  # the reader's constants wait for a model that loads
        return await answer_plan(
            ChainPlan,
            config,
            self.services,
            planning,
            budget_s=config.sourced("budget_s", config.budget_s),
            llm_timeout_s=Sourced(self.services.settings.llm.timeout_s, "settings"),
            **constants,
        )

    async def process_response(self, request: SearchRequest, response: JSON, ctx: PipelineContext) -> JSON:
        question = (ctx.question or "").strip()
        if not question:
            return response
        if not self.services.llm.configured:
            self.warn(ctx, "no LLM is configured; the chain was skipped")
            return response
        try:
            # Loaded before the budget starts: the first search pays the model load, not the chain.
            models = await self.services.models()
        except ModelError as exc:
            self.warn(ctx, f"the reader is unavailable ({exc.reason}); the chain was skipped")
            return response
        plan = ctx.plan(self, ChainPlan)
        if plan.theta is None or plan.answer_margin is None:
            self.warn(ctx, "the reader was unavailable when the search opened; the chain was skipped")
            return response
        if await self._reader_is_sure(question, response, models, plan, ctx):
            ctx.report.llm_skipped.append(self.type_name)
            return response
        theta, margin = plan.theta.value, plan.answer_margin.value
        # Its share of the pipeline's time, less a margin for tracing and the report.
        deadline = ctx.deadline.within(min(plan.budget_s.value, ctx.deadline.for_work()))
        result = await ChainRun(
            services=self.services,
            config=self.config,
            index=self.config.index or request.index,
            theta=theta,
            answer_margin=margin,
            search=ctx.search,
            question=question,
            deadline=deadline,
            llm_timeout_s=plan.llm_timeout_s.value,
        ).run()
        for warning in result.warnings:
            self.warn(ctx, warning)
        entailed = await content_entailed(models, result.final_content, result.path) if result.final_content else None
        if entailed is False:
            self.warn(ctx, "the verified nodes' references do not entail the final content; the chain abstained")
        ignored = ignored_corrections(result.final_content or "", result.path)
        if ignored:
            said = "; ".join(f"{r.llm_answer!r}, corrected to {r.answer!r}" for r in ignored)
            self.warn(ctx, f"the final content states what IR corrected ({said}); the chain abstained")
        refuted, lexical = entailed is False or bool(ignored), entailed is None
        report = _report(question, result, theta, self.config.max_reference_chars, refuted=refuted, lexical=lexical)
        ctx.report.chain = report
        if plan.answers:  # through the answer's policy, as cited_answer's
            ctx.report.answer = gate(
                await self._answer(question, report, models, plan), plan.policy(self.config.abstain_text)
            )
        return response

    async def _reader_is_sure(
        self, question: str, response: JSON, models: Models, plan: ChainPlan, ctx: PipelineContext
    ) -> bool:
        """Whether the reader's featured snippet from the hits is confident enough to answer without
        the chain: ``cited_answer``'s rule for its LLM (auto mode, the more confident answer preferred)."""
        calibrator, policy = plan.calibrator, plan.policy(self.config.abstain_text)
        if policy.skip_llm_above >= 1:  # 1 means never: spare the reader its run
            return False
        fields = EvidenceFields(text=self.config.text_field, title=None)
        hits = hits_of(response)
        evidence = answer_evidence(ctx.report, hits, fields, size=EVIDENCE_SIZE, snippet_chars=SNIPPET_CHARS)
        found = await featured_snippet(question, in_context(evidence, hits, max_chars=READING_CHARS), models)
        if found is None:
            return False
        snippet = found.answer.model_copy(update={"confidence": calibrator.confidence(found.signals)})
        return not asks_llm(snippet, policy)

    async def _answer(self, question: str, report: ChainReport, models: Models, plan: ChainPlan) -> Answer:
        """The chain's answer for RAG clients: only verified citations, or an abstention.

        Its confidence is the generative calibrator's: the chain's text is the LLM's, checked
        by the reader, so it is scored as an LLM's checked answer over the chain's references."""
        if report.abstained or report.final_content is None:
            return abstention(self.config.abstain_text, "chain", "chain_unverified", llm="used")
        citations = [
            Citation(marker=c.marker, index=c.index, id=c.id, field=c.field, start=c.start, end=c.end, quote=c.quote)
            for c in report.citations
            if c.verified
        ]
        calibrator = plan.calibrator
        fields = EvidenceFields(text=self.config.text_field, title=None)
        snippet = await featured_snippet(question, evidence_from_references(report.references, [], fields), models)
        signals = beside_the_snippet(
            report.final_content,
            support=snippet.signals.score if snippet is not None else -1.0,
            snippet=snippet.answer.text if snippet is not None else "",
            snippet_confidence=calibrator.probability(snippet.signals) if snippet is not None else 0.0,
        )
        return Answer(
            text=report.final_content,
            citations=citations,
            mode="chain",
            confidence=calibrator.confidence(signals),
            llm="used",
            signals=signals_record(signals),
        )


def _citation(marker: int, record: NodeRecord, by: Literal["marker", "answer"]) -> ChainCitation | None:
    if record.evidence is None:
        return None
    found = record.evidence.found
    return found.wire(
        ChainCitation, marker=marker, by=by, query=record.query, quote=found.text, verified=record.verified
    )


def _references(records: list[NodeRecord], max_chars: int) -> list[PassagePiece]:
    """The passages IR verified nodes with, once each: the evidence ``cited_answer`` takes."""
    found: dict[Span, PassagePiece] = {}
    for record in records:
        if record.verified and record.evidence is not None:
            window = record.evidence.window(max_chars)
            found.setdefault(window, window.wire(PassagePiece, text=window.text))
    return list(found.values())


def _cited(
    content: str, path: list[NodeRecord]
) -> tuple[str, Literal["marker", "answer"], list[tuple[int, NodeRecord]]]:
    """The path nodes a final content cites: its own ``[k]`` markers; when it has none (small
    LLMs drop them), the verified nodes whose answer it states in so many words, with their
    markers appended. Returns the content, how it was traced and the (marker, node) pairs."""
    markers = citation_markers(content)
    if markers:
        return content, "marker", [(k, path[k - 1]) for k in markers if 1 <= k <= len(path)]
    stated = [
        (k, r) for k, r in enumerate(path, start=1) if r.verified and r.answer and contains_answer(r.answer, content)
    ]
    if stated:
        content = content.rstrip() + " " + "".join(f"[{k}]" for k, _ in stated)
    return content, "answer", stated


def _report(
    question: str, result: RunResult, theta: float, max_reference_chars: int, *, refuted: bool, lexical: bool
) -> ChainReport:
    """``ext.answerbox.chain``. The final content is presented only when it cites a verified
    node (else the chain abstains: text that cites nothing verified cannot be traced) and is not
    ``refuted`` (the claim verifier's references do not entail it, or it states what IR
    corrected); ``verified`` is true only when every node of the path is verified and, without
    the claim verifier (``lexical``), the content states every answer IR gave a cited node."""
    content, by, cited = _cited(result.final_content, result.path) if result.final_content else (None, "marker", [])
    abstained = content is None or not any(record.verified for _, record in cited) or refuted
    stated = not lexical or all(r.states_ir(content or "") for _, r in cited)
    citations = [] if abstained else [c for k, record in cited if (c := _citation(k, record, by)) is not None]
    position = {id(r): i for i, r in enumerate(result.records)}
    return ChainReport(
        question=question,
        rounds=len(result.tree),
        stopped=result.stopped.value,
        theta=theta,
        nodes=[r.report() for r in result.records],
        path=[position[id(r)] for r in result.path],
        final_content=None if abstained else content,
        final_answer=None if abstained or content is None else final_answer(content),
        unverified_content=result.final_content if abstained else None,
        citations=citations,
        references=_references(result.records, max_reference_chars),
        verified=not abstained and stated and all(r.verified for r in result.path),
        abstained=abstained,
        tree=[b.report() for b in result.tree],
        llm=result.usage,
    )
