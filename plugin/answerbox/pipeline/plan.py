"""A search's run plan: what its pipeline will do, each value with where it came from.

The values a run goes by come from five places: answerbox's defaults, its settings, the
model's manifest (moved by a pipeline's ``calibration``), the pipeline, and the search's
``ext.generative_qa_parameters``. ``plan_of`` resolves them once, through the same functions
the processors run with, and says which one won. A search with ``verbose_pipeline=true``
carries its plan in ``ext.answerbox.plan``; ``GET /_search/pipeline/{id}?explain`` gives a
stored pipeline's (no search, so nothing from a request)::

    {"pipeline": "answers", "budget_s": {"value": 10.0, "source": "pipeline"}, ...,
     "steps": [{"processor": "cited_answer", "phase": "response", "share": 0.5,
                "values": {"min_confidence": {"value": 0.5836, "source": "manifest"}, ...}}]}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from answerbox.core.config import Limits
from answerbox.core.contract import GenerativeQAParameters, Planned, PlannedStep, RunPlan
from answerbox.pipeline.base import Processor
from answerbox.pipeline.pipeline import Pipeline

__all__ = ["Resolved", "plan_of"]

_MEMORY = "the search names a memory (generative_qa_parameters.memory_id)"


@dataclass(frozen=True, slots=True)
class Resolved:
    """A search's plan, and each step's values by the processor that runs with them."""

    plan: RunPlan
    values: dict[Processor[Any], dict[str, Planned]]


async def plan_of(pipeline: Pipeline, qa: GenerativeQAParameters | None, limits: Limits) -> Resolved:
    """``pipeline``'s plan for a search with ``qa`` (None: none, or no search), under ``limits``."""
    order: list[tuple[Literal["request", "response"], Processor[Any]]] = [
        *(("request", p) for p in pipeline.request_processors),
        *(("response", p) for p in pipeline.response_processors),
    ]
    weights = sum(p.budget_weight for _, p in order) or 1.0
    values = {p: await p.planned(qa) for _, p in order}
    for i, (_, p) in enumerate(order):
        values[p] |= p.planned_after([(q, values[q]) for _, q in order[i + 1 :]])
    steps = [
        PlannedStep(
            processor=p.name,
            phase=phase,
            share=round(p.budget_weight / weights, 4),
            added=_MEMORY if pipeline.conversation_added and p is pipeline.conversation else None,
            values=values[p],
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
        in_opensearch=[
            name
            for section in (native.request_processors, native.response_processors, native.phase_results_processors)
            for entry in section
            for name in entry
        ]
        if native is not None
        else [],
    )
    return Resolved(plan, values)
