"""A search's run plan: what its pipeline will do, each value with where it came from.

The values a run goes by come from five places: answerbox's defaults, its settings, the
model's manifest (moved by the pipeline's ``calibration``), the pipeline, and the search (its
``ext.generative_qa_parameters``, and what it asks of its hits: ``pipeline/run/hits_asked.py``).
``plan_of`` resolves each step's plan once (``Processor.plan``), last step first (a step may
follow those after it); the steps run with these plans, and the run plan is rendered from
them. A search with ``verbose_pipeline=true`` carries its plan in ``ext.answerbox.plan``;
``GET /_search/pipeline/{id}?explain`` gives a stored pipeline's (no search: a plain one)::

    {"pipeline": "answers", "budget_s": {"value": 10.0, "source": "pipeline"}, ...,
     "steps": [{"processor": "cited_answer", "phase": "response", "share": 0.5, "skipped": null,
                "values": {"min_confidence": {"value": 0.5836, "source": "manifest"}, ...}}],
     "answer": "cited_answer"}
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

from answerbox.core.config import Limits
from answerbox.core.contract import GenerativeQAParameters, Planned, PlannedStep, RunPlan
from answerbox.pipeline.base import Planning, Processor, StepPlan
from answerbox.pipeline.run.hits_asked import PLAIN_SEARCH, HitsAsked
from answerbox.pipeline.run.pipeline import Pipeline

__all__ = ["Resolved", "plan_of"]

_MEMORY = "the search names a memory (generative_qa_parameters.memory_id)"


@dataclass(frozen=True, slots=True)
class Resolved:
    """A search's plan, and each step's by the processor that runs with it."""

    plan: RunPlan
    plans: dict[Processor[Any], StepPlan]


async def plan_of(
    pipeline: Pipeline, qa: GenerativeQAParameters | None, limits: Limits, asked: HitsAsked = PLAIN_SEARCH
) -> Resolved:
    """``pipeline``'s plan for a search with ``qa`` that asks ``asked`` of its hits (None and the
    default: no search), under ``limits``."""
    order: list[tuple[Literal["request", "response"], Processor[Any]]] = [
        *(("request", p) for p in pipeline.request_processors),
        *(("response", p) for p in pipeline.response_processors),
    ]
    weights = sum(p.budget_weight for _, p in order) or 1.0
    answer = pipeline.answer_step
    plans: dict[Processor[Any], StepPlan] = {}
    for i, (phase, p) in reversed(list(enumerate(order))):
        later = [(q, plans[q]) for _, q in order[i + 1 :]]
        plan = await p.plan(Planning(qa=qa, asked=asked, later=later, answers=p is answer))
        # Every response step reads the hits: a search that keeps them as found skips them all.
        plans[p] = replace(plan, skipped=asked.kept_as_found) if phase == "response" and asked.kept_as_found else plan
    steps = [
        PlannedStep(
            processor=p.name,
            phase=phase,
            share=round(p.budget_weight / weights, 4),
            added=_MEMORY if pipeline.conversation_added and p is pipeline.conversation else None,
            skipped=plans[p].skipped,
            values=plans[p].values(),
        )
        for phase, p in order
    ]
    native = pipeline.native
    plan = RunPlan(
        pipeline=pipeline.id,
        budget_s=Planned(value=pipeline.budget_s, source="pipeline" if pipeline.budget_from_pipeline else "settings"),
        processor_timeout_s=Planned(value=pipeline.timeout_s, source="settings"),
        llm_calls=Planned(value=limits.max_llm_calls, source="settings"),
        render_cpu_s=Planned(value=limits.render_budget_s, source="settings"),
        steps=steps,
        answer=answer.name if answer is not None else None,
        in_opensearch=[
            name
            for section in (native.request_processors, native.response_processors, native.phase_results_processors)
            for entry in section
            for name in entry
        ]
        if native is not None
        else [],
    )
    return Resolved(plan, plans)
