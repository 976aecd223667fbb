"""Response processor ``retrieval_evaluator``: CRAG's corrective retrieval (``methods.md`` §2).

The ONNX evaluator scores the top ``top_n`` hits against the user's question
(``ctx.question``, never an expanded query); a hit with several text fields scores as its
best field, and a hit with no text scores -1. The verdict follows CRAG: **correct** when
some hit scores >= ``upper``, **incorrect** when every hit scores < ``lower`` (so also when
there are no hits), **ambiguous** otherwise. The thresholds come from the model manifest
(``crag_upper`` / ``crag_lower``) unless the pipeline sets ``upper`` / ``lower``.

- correct → knowledge refinement of the hits (:mod:`answerbox.processors.retrieval_evaluator.knowledge`):
  of the ``strips_top_k`` best passages scoring at least ``lower``, where the kept strips come from;
- incorrect → the hits are discarded as knowledge; a corrective search
  (:mod:`answerbox.processors.retrieval_evaluator.corrective`) runs and its hits are scored and refined;
- ambiguous → both; corrective hits already among the scored hits are left out.

``ambiguous`` says what an Ambiguous search does: ``refine+corrective_search``, CRAG's both;
``refine``, the refined hits alone (no corrective search); ``auto``, both unless every later step of the
pipeline reads passages (the reader): a reader seldom finds its answer in an Ambiguous search's corrective
hits (on held-out training articles, 6 right answers and 18 wrong ones in 289 Ambiguous searches), and
the search with their forward passes was a third to two fifths of such an answer's time
(``onnx_models/LOG.md``, *An Ambiguous search before a reader*).
An Incorrect search always runs the corrective search.

``refine`` says what a strip is: ``strips``, CRAG's; ``passages``, each refined passage whole,
with the score it has (no more model calls); ``auto``, strips unless every later step of the
pipeline reads passages, not strips (``cited_answer`` in ``mode: extractive``: its reader reads
a strip back in its passage, up to ``reading_chars``, and a whole passage from the windows that
scored it, so the strips' forward passes buy it next to nothing; ``onnx_models/LOG.md``, *Strips
for a reader*). The run plan shows which one a search got.

The hits are scored in two passes where the model's manifest sets ``crag_first_pass_stop``: the
engine's first ``first_pass`` hits, then the rest of the top ``top_n`` only when none of the first
scores at least that stop (never below ``upper``: a first pass that stops has found CRAG's Correct).
Hits a stopped search did not score are treated as hits past ``top_n``. The stop is chosen with the
answer's calibrator in the loop (``onnx_models/LOG.md``, *Two passes over the hits*); without one,
or with ``first_pass: null``, every hit is scored at once.

Options on the hits themselves: ``drop_below_lower`` removes scored hits under ``lower``
(``hits.total`` is left alone, as OpenSearch's ``truncate_hits`` does); ``rerank`` sorts
the scored hits by the evaluator's score fused with the engine's
(:mod:`answerbox.processors.retrieval_evaluator.fusion`)::

    _score = evaluator score + fusion_weight · engine _score / best engine _score of the scored hits

sets ``_score`` to it and, with ``keep_previous_score``, keeps the engine's score in the
hit as ``_previous_score`` (in the hit, not in ``_source``, so the document is returned as
stored). The engine's term is scale-free (a share of the best scored hit's score), so one
weight serves any similarity. ``fusion_weight`` defaults to the manifest's
``rerank_fusion_weight``, chosen on training questions by ``python -m onnx_models.calibrate.fusion``
(0 in a manifest without it: the evaluator alone). Ties keep the engine's order. A search
with a ``sort`` of its own (``_score`` first included: its hits carry the sort values a caller
pages on; ``pipeline/run/hits_asked.py``) is a listing: its hits are judged, but neither reranked
nor dropped, with a warning. When the scored hits have no comparable engine scores (null or
negative), they are reranked by the evaluator alone, with a warning. The verdict, the
thresholds, ``drop_below_lower`` and the reported scores always use the evaluator's score,
never the fused one. Hits past ``top_n`` are not scored and stay after the scored ones, in the
engine's order; a rerank gives them scores under the lowest fused one
(:func:`~answerbox.processors.retrieval_evaluator.fusion.scores_below`, the engine's kept as
``_previous_score``), so that ``_score`` descends down the hits. Whenever hits are reranked or
dropped, ``max_score`` is the first hit's ``_score``. The corrective search's hits are knowledge
only: none joins the hits.

Config (defaults in brackets): ``top_n`` [10]; ``first_pass`` [4], ``first_pass_stop`` [the
manifest's]; ``text_fields`` [every top-level string field of ``_source``]; ``upper`` / ``lower``
[the manifest's]; ``refine`` [auto]; ``ambiguous`` [auto]; ``sentences_per_strip`` [3],
``strips_top_k`` [5], ``strip_threshold`` [-0.5] (CRAG's refinement); ``corrective``
[same target, ``operator: or``, ``fuzziness: AUTO`` with ``prefix_length: 2``, ``keywords: llm`` (``question``: the
question's own words, no LLM call); ``null``: none, and Incorrect only discards];
``rerank`` [false], ``fusion_weight`` [the manifest's], ``keep_previous_score`` [true],
``drop_below_lower`` [false].

Failures degrade the knowledge, never the hits: an evaluator failure leaves the response
as it came (with a warning); an LLM failure during the rewrite falls back to keywords
taken from the question, and the rewrite gets at most half the processor timeout so a
slow LLM cannot time the whole processor out; a failed corrective search leaves the
refined hits alone, and so does one refused: ``corrective.index`` is not searched for a caller
whose target is a filtered or routed alias (``ScopedSearch``).

``ext.answerbox.retrieval`` is a ``RetrievalReport`` (``answerbox.core.contract``): the verdict,
the thresholds applied, the scored hits in OpenSearch's order, the action, the knowledge
strips (``_source[field][start:end] == text``; refined hits first, then corrective hits,
each group in document order; ``cited_answer`` takes them as its evidence), the corrective
search's query and scores, and how many hits ``drop_below_lower`` removed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from answerbox.core.contract import CorrectiveReport, HitScore, KnowledgeStrip, RetrievalAction, RetrievalReport
from answerbox.core.errors import ConfigError, ModelError, OutOfScope, UpstreamError, UpstreamUnavailable
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
from answerbox.processors.retrieval_evaluator.corrective import (
    KEYWORD_REWRITE_TEMPLATE,
    CorrectiveSearchConfig,
    corrective_query,
    rewrite_question,
)
from answerbox.processors.retrieval_evaluator.fusion import fuse, scores_below
from answerbox.processors.retrieval_evaluator.knowledge import refine, whole
from answerbox.processors.text.passages import hit_key, hits_of, passages_of
from answerbox.processors.text.spans import Passage
from answerbox.prompts.library import Prompt

if TYPE_CHECKING:
    from answerbox.models import Evaluator
    from answerbox.services import Services

__all__ = ["RetrievalEvaluator", "RetrievalEvaluatorConfig", "Verdict", "judge"]

# A hit without text cannot support an answer: it scores as the worst possible passage.
_NO_TEXT_SCORE = -1.0
# The keyword rewrite's share of the processor's time left (see _rewrite_timeout).
_REWRITE_SHARE = 0.5


class Verdict(StrEnum):
    CORRECT = "correct"
    AMBIGUOUS = "ambiguous"
    INCORRECT = "incorrect"


class RetrievalEvaluatorConfig(ProcessorConfig):
    top_n: int = Field(default=10, ge=1)
    first_pass: int | None = Field(default=4, ge=1)  # None: every scored hit in one pass
    first_pass_stop: float | None = Field(default=None, ge=-1, le=1)  # None: the manifest's
    text_fields: list[str] | None = Field(default=None, min_length=1)  # None: every top-level string field
    upper: float | None = Field(default=None, ge=-1, le=1)
    lower: float | None = Field(default=None, ge=-1, le=1)
    # auto: CRAG's strips where a later step may write from them with an LLM (or none follows),
    # whole passages where every later step reads passages (the reader does).
    refine: Literal["auto", "strips", "passages"] = "auto"
    # auto: CRAG's both where a later step may write from the knowledge with an LLM (or none
    # follows), the refined hits alone where every later step reads passages (the reader).
    ambiguous: Literal["auto", "refine+corrective_search", "refine"] = "auto"
    sentences_per_strip: int = Field(default=3, ge=1)
    strips_top_k: int = Field(default=5, ge=1)
    strip_threshold: float = Field(default=-0.5, ge=-1, le=1)
    corrective: CorrectiveSearchConfig | None = CorrectiveSearchConfig()
    # Orders the scored hits by the evaluator's score fused with the engine's; a search with a sort
    # of its own (the caller's order, or sort values it pages on) keeps the caller's order.
    rerank: bool = False
    fusion_weight: float | None = Field(default=None, ge=0, allow_inf_nan=False)  # None: the manifest's
    keep_previous_score: bool = True
    # Removes the scored hits under lower (hits.total left alone); a search with a sort of its own
    # keeps all its hits.
    drop_below_lower: bool = False

    @model_validator(mode="after")
    def _ordered_thresholds(self) -> RetrievalEvaluatorConfig:
        if self.upper is not None and self.lower is not None and self.lower > self.upper:
            raise ValueError(f"lower ({self.lower}) must not be above upper ({self.upper})")
        return self


@dataclass(frozen=True, slots=True, kw_only=True)
class EvaluatorPlan(StepPlan):
    top_n: Sourced[int]
    first_pass: Sourced[int | None]
    rerank: Sourced[bool]
    drop_below_lower: Sourced[bool] | None = None  # shown where the pipeline drops
    sorted_by: Sourced[str] | None = None  # the search's own sort: its hits keep their order
    refine: Sourced[Literal["strips", "passages"]]
    ambiguous: Sourced[Literal["refine+corrective_search", "refine"]]
    rewrite_llm_timeout_s: Sourced[float] | None = None
    # The model's, unless the pipeline sets them; None: the model did not load.
    upper: Sourced[float] | None = None
    lower: Sourced[float] | None = None
    first_pass_stop: Sourced[float | None] | None = None
    fusion_weight: Sourced[float] | None = None

    def thresholds(self) -> tuple[float, float]:
        if self.upper is None or self.lower is None:
            raise ModelError("the model had not loaded when the search opened")
        return self.upper.value, self.lower.value


def judge(scores: Sequence[float], upper: float, lower: float) -> Verdict:
    if any(score >= upper for score in scores):
        return Verdict.CORRECT
    if all(score < lower for score in scores):
        return Verdict.INCORRECT
    return Verdict.AMBIGUOUS


# What a verdict does, given whether the corrective search ran; any other pair only refines.
_ACTIONS: dict[tuple[Verdict, bool], RetrievalAction] = {
    (Verdict.AMBIGUOUS, True): "refine+corrective_search",
    (Verdict.INCORRECT, True): "corrective_search",
    (Verdict.INCORRECT, False): "discard",
}


def _score_list(hits: Sequence[JSON], scores: Sequence[float]) -> list[HitScore]:
    return [
        HitScore(index=index, id=doc_id, score=round(score, 4))
        for (index, doc_id), score in zip((hit_key(h) for h in hits), scores, strict=True)
    ]


@dataclass(frozen=True, slots=True)
class _Scores:
    """The evaluator's scores of some hits: per hit (its best passage) and per passage."""

    hits: list[float]
    passages: list[tuple[Passage, float]]

    def __add__(self, other: _Scores) -> _Scores:
        return _Scores(self.hits + other.hits, self.passages + other.passages)

    def worth_refining(self, lower: float, top_k: int) -> list[tuple[Passage, float]]:
        """The passages whose strips may become knowledge, with their scores: the ``top_k`` best scoring at least
        ``lower``, in document order. At most ``top_k`` strips are kept, and a strip of a
        passage the evaluator ruled irrelevant as a whole almost never beats those of the
        passages it ruled relevant; scoring their strips would be most of a search's model work."""
        eligible = [i for i, (_, score) in enumerate(self.passages) if score >= lower]
        best = sorted(eligible, key=lambda i: self.passages[i][1], reverse=True)[:top_k]
        return [self.passages[i] for i in sorted(best)]


async def _score_hits(evaluator: Evaluator, question: str, passages: Sequence[Sequence[Passage]]) -> _Scores:
    """One evaluator call for every passage of every hit; a hit scores as its best passage."""
    flat = await evaluator.score(question, [p.text for group in passages for p in group])
    scores, offset = [], 0
    for group in passages:
        scores.append(max(flat[offset : offset + len(group)], default=_NO_TEXT_SCORE))
        offset += len(group)
    return _Scores(scores, list(zip((p for group in passages for p in group), flat, strict=True)))


@dataclass(frozen=True, slots=True)
class _Corrective:
    """What the corrective search added: its query, its report section and its refined strips."""

    query: str | None = None
    details: CorrectiveReport | None = None
    strips: list[KnowledgeStrip] = field(default_factory=list)


class RetrievalEvaluator(ResponseProcessor[RetrievalEvaluatorConfig]):
    type_name = "retrieval_evaluator"
    uses_models = True
    config_model = RetrievalEvaluatorConfig

    def __init__(self, config: RetrievalEvaluatorConfig, services: Services) -> None:
        super().__init__(config, services)
        # Compiled at build time so a broken prompt override fails when the pipeline is PUT.
        self._prompt = (
            services.prompts.get(KEYWORD_REWRITE_TEMPLATE, config.corrective.prompt) if config.corrective else None
        )

    async def plan(self, planning: Planning) -> EvaluatorPlan:
        config = self.config
        most = self.services.settings.limits.max_hits_processed
        top_n = config.sourced("top_n", config.top_n) if config.top_n <= most else Sourced(most, "settings")
        # A search with a sort of its own is a listing (a scroll's export among them): its hits are
        # judged, but neither reranked nor dropped.
        sort = planning.asked.sort if config.rerank or config.drop_below_lower else None
        keep: Sourced[bool] | None = Sourced(False, "request") if sort is not None else None
        # Strips and an Ambiguous search's corrective hits are for an LLM to write from: a reader
        # reads strips back in their passages, which the evaluator's windows already cover, and
        # seldom finds its answer in those hits.
        writes = not planning.later or any(step.writes_from_knowledge(plan) for step, plan in planning.later)
        corrective = config.corrective
        plan = EvaluatorPlan(
            top_n=top_n,
            first_pass=config.sourced("first_pass", config.first_pass),
            rerank=keep or config.sourced("rerank", config.rerank),
            drop_below_lower=(keep or config.sourced("drop_below_lower", True)) if config.drop_below_lower else None,
            sorted_by=Sourced(sort, "request") if sort is not None else None,
            refine=config.sourced("refine", config.refine)
            if config.refine != "auto"
            else Sourced("strips" if writes else "passages", "default"),
            ambiguous=config.sourced("ambiguous", config.ambiguous)
            if config.ambiguous != "auto"
            else Sourced("refine+corrective_search" if writes else "refine", "default"),
            rewrite_llm_timeout_s=first_set(
                (corrective.llm_timeout_s, "pipeline"), (self.services.settings.llm.timeout_s, "settings")
            )
            if corrective is not None and corrective.keywords == "llm"
            else None,
        )
        try:
            manifest = (await self.services.models()).manifest
        except ModelError:
            return plan  # the thresholds wait for a model that loads
        upper = config.sourced("upper", manifest.crag_upper if config.upper is None else config.upper, "manifest")
        lower = config.sourced("lower", manifest.crag_lower if config.lower is None else config.lower, "manifest")
        if lower.value > upper.value:
            raise ConfigError(
                f"processor [{self.name}]: lower ({lower.value}) is above upper ({upper.value}) once the model's "
                "thresholds fill in"
            )
        # Where the first pass is enough; never below upper: a first pass that stops must have found
        # CRAG's Correct, or the corrective search would run on half the hits.
        stop = manifest.crag_first_pass_stop if config.first_pass_stop is None else config.first_pass_stop
        weight = manifest.rerank_fusion_weight if config.fusion_weight is None else config.fusion_weight
        return replace(
            plan,
            upper=upper,
            lower=lower,
            first_pass_stop=config.sourced(
                "first_pass_stop", None if stop is None else max(stop, upper.value), "manifest"
            )
            if config.first_pass is not None
            else None,
            fusion_weight=config.sourced("fusion_weight", weight, "manifest") if plan.rerank.value else None,
        )

    def writes_from_knowledge(self, plan: StepPlan) -> bool:
        return False  # it keeps knowledge, and reads none

    def _rewrite_timeout(self, config: CorrectiveSearchConfig, plan: EvaluatorPlan, ctx: PipelineContext) -> float:
        """The LLM's time for the rewrite: never more than half the processor's time left, so that a
        slow LLM ends in the keyword fallback rather than in a processor timeout that loses the hits."""
        if config.keywords != "llm":
            return 0.0  # no LLM is asked
        timeout = plan.rewrite_llm_timeout_s.value if plan.rewrite_llm_timeout_s is not None else 0.0
        return min(timeout, ctx.deadline.share(_REWRITE_SHARE))

    async def process_response(self, request: SearchRequest, response: JSON, ctx: PipelineContext) -> JSON:
        question = (ctx.question or "").strip()
        if not question:
            self.warn(ctx, "the search has no question text; retrieval was not evaluated")
            return response
        plan = ctx.plan(self, EvaluatorPlan)
        hits = hits_of(response)
        scored = hits[: plan.top_n.value]
        passages = [passages_of(hit, self.config.text_fields) for hit in scored]
        try:
            # Within its share of the pipeline's time: under load the model's queue may be too
            # long, and then the hits go on unjudged rather than the search failing.
            async with asyncio.timeout(ctx.deadline.for_work()):
                models = await self.services.models()
                upper, lower = plan.thresholds()
                judged = await self._score_in_passes(models.evaluator, question, passages, plan)
                scores = judged.hits
                scored = scored[: len(scores)]
                verdict = judge(scores, upper, lower)
                config, prompt = self.config.corrective, self._prompt
                searches = verdict is Verdict.INCORRECT or (
                    verdict is Verdict.AMBIGUOUS and plan.ambiguous.value == "refine+corrective_search"
                )
                seen = {hit_key(h) for h in scored}
                internal, corrective = await asyncio.gather(
                    self._refine(models.evaluator, question, judged, lower, plan, ctx)
                    if verdict is not Verdict.INCORRECT
                    else asyncio.sleep(0, result=[]),
                    self._corrective(config, prompt, models.evaluator, question, request, seen, lower, plan, ctx)
                    if searches and config is not None and prompt is not None
                    else asyncio.sleep(0, result=_Corrective()),
                )
        except ModelError as exc:
            self.warn(ctx, f"the retrieval evaluator failed; hits are unchanged: {exc.reason}")
            return response
        except TimeoutError:
            self.warn(ctx, "the evaluator did not finish in its share of the pipeline's time; hits are unchanged")
            return response
        if plan.sorted_by is not None:
            self.warn(
                ctx,
                f"the search is sorted by [{plan.sorted_by.value}]: its hits keep the caller's order, none reranked "
                "or dropped",
            )
        rerank, drop = plan.rerank.value, plan.drop_below_lower is not None and plan.drop_below_lower.value
        ranking = self._rank_scores(scored, scores, plan, ctx) if rerank else scores
        dropped = self._apply_to_hits(response, hits, scores, ranking, lower, rerank=rerank, drop=drop)
        ctx.report.retrieval = RetrievalReport(
            verdict=verdict.value,
            upper=upper,
            lower=lower,
            scores=_score_list(scored, scores),
            action=_ACTIONS.get((verdict, searches and self.config.corrective is not None), "refine"),
            knowledge=internal + corrective.strips,
            corrective_query=corrective.query,
            corrective=corrective.details,
            reranked=rerank,
            dropped=dropped,
        )
        return response

    async def _score_in_passes(
        self, evaluator: Evaluator, question: str, passages: Sequence[Sequence[Passage]], plan: EvaluatorPlan
    ) -> _Scores:
        """The engine's ``first_pass`` best hits, then the rest of the scored hits only when none of the first
        reaches the stop: reading them is half a search's model work, and a hit the engine ranks high that
        the evaluator finds surely relevant seldom gives way to a lower one."""
        first, stop = plan.first_pass.value, plan.first_pass_stop.value if plan.first_pass_stop else None
        if first is None or stop is None or first >= len(passages):
            return await _score_hits(evaluator, question, passages)
        judged = await _score_hits(evaluator, question, passages[:first])
        if any(score >= stop for score in judged.hits):
            return judged
        return judged + await _score_hits(evaluator, question, passages[first:])

    async def _refine(
        self,
        evaluator: Evaluator,
        question: str,
        scores: _Scores,
        lower: float,
        plan: EvaluatorPlan,
        ctx: PipelineContext,
    ) -> list[KnowledgeStrip]:
        config = self.config
        worth = scores.worth_refining(lower, config.strips_top_k)
        if plan.refine.value == "passages":
            return whole(worth, top_k=config.strips_top_k, threshold=config.strip_threshold)
        try:
            return await refine(
                evaluator,
                question,
                [passage for passage, _ in worth],
                sentences_per_strip=config.sentences_per_strip,
                top_k=config.strips_top_k,
                threshold=config.strip_threshold,
            )
        except ModelError as exc:
            self.warn(ctx, f"knowledge refinement failed: {exc.reason}")
            return []

    async def _corrective(
        self,
        config: CorrectiveSearchConfig,
        prompt: Prompt,
        evaluator: Evaluator,
        question: str,
        request: SearchRequest,
        seen: set[tuple[str, str]],
        lower: float,
        plan: EvaluatorPlan,
        ctx: PipelineContext,
    ) -> _Corrective:
        """Rewrite, search again with the caller's credentials, score and refine the hits not ``seen`` yet."""
        rewrite = await rewrite_question(
            self.services.llm, prompt, question, config, self._rewrite_timeout(config, plan, ctx)
        )
        if rewrite.failure:
            self.warn(ctx, f"keyword rewrite used the question's own words: {rewrite.failure}")
        index = config.index or request.index
        details = CorrectiveReport(index=index, keywords=list(rewrite.keywords), keywords_source=rewrite.source)
        if not rewrite.keywords:
            self.warn(ctx, "the question has no keywords; no corrective search")
            return _Corrective(details=details)
        searched = config.fields or self.config.text_fields
        query = corrective_query(config, rewrite.query, searched)
        try:
            # The caller's text on the fields searched gives way to the keywords; none named: all
            # fields are, and the caller's text stays a filter.
            found = await ctx.search.search(
                query, size=config.size, fields=self.config.text_fields, searched=searched or (), index=index
            )
        except (UpstreamError, UpstreamUnavailable, OutOfScope) as exc:
            self.warn(ctx, f"the corrective search failed: {exc.reason}")
            return _Corrective(query=rewrite.query, details=details)
        hits = [hit for hit in hits_of(found) if hit_key(hit) not in seen]
        passages = [passages_of(hit, self.config.text_fields) for hit in hits]
        try:
            scores = await _score_hits(evaluator, question, passages)
        except ModelError as exc:
            self.warn(ctx, f"scoring the corrective hits failed: {exc.reason}")
            return _Corrective(query=rewrite.query, details=details)
        details.scores = _score_list(hits, scores.hits)
        strips = await self._refine(evaluator, question, scores, lower, plan, ctx)
        return _Corrective(query=rewrite.query, details=details, strips=strips)

    def _rank_scores(
        self, scored: Sequence[JSON], scores: Sequence[float], plan: EvaluatorPlan, ctx: PipelineContext
    ) -> list[float]:
        """What ``rerank`` sorts by and writes to ``_score``: the evaluator's scores fused with the engine's."""
        weight = plan.fusion_weight.value if plan.fusion_weight is not None else 0.0
        fused = fuse(scores, [hit.get("_score") for hit in scored], weight)
        if fused is None:
            self.warn(ctx, "the hits have no comparable engine scores; reranked by the evaluator's score alone")
            return list(scores)
        return fused

    def _apply_to_hits(
        self,
        response: JSON,
        hits: list[JSON],
        scores: Sequence[float],
        ranking: Sequence[float],
        lower: float,
        *,
        rerank: bool,
        drop: bool,
    ) -> int:
        """Drop (on the evaluator's ``scores``) and rerank (on ``ranking``) the scored hits in place; return how many
        were dropped."""
        if not scores or not (rerank or drop):
            return 0
        scored = list(zip(hits[: len(scores)], scores, ranking, strict=True))
        rest = hits[len(scores) :]
        kept = [row for row in scored if row[1] >= lower] if drop else scored
        if rerank:
            kept.sort(key=lambda row: row[2], reverse=True)  # stable: ties keep the engine's order
            if kept:
                # The unread hits stay after the read ones: their scores go under the lowest read one.
                below = scores_below(kept[-1][2], [hit.get("_score") for hit in rest])
                self._rescore([(hit, rank_score) for hit, _, rank_score in kept] + list(zip(rest, below, strict=True)))
        response["hits"]["hits"] = ordered = [hit for hit, _, _ in kept] + rest
        if rerank or len(kept) < len(scored):
            # OpenSearch's contract: max_score is the best _score returned, and the hits descend from it.
            response["hits"]["max_score"] = ordered[0].get("_score") if ordered else None
        return len(scored) - len(kept)

    def _rescore(self, rescored: Sequence[tuple[JSON, float]]) -> None:
        for hit, score in rescored:
            if self.config.keep_previous_score:
                hit["_previous_score"] = hit.get("_score")
            hit["_score"] = score
