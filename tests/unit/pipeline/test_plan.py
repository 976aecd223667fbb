"""The run plan of pipelines built directly: each step's share of the budget, the conversation
step a memory adds (and says why), and the budget's source."""

from __future__ import annotations

from typing import cast

from answerbox.core.config import Limits
from answerbox.pipeline.run.pipeline import Pipeline
from answerbox.pipeline.run.plan import plan_of
from answerbox.pipeline.run.stats import PipelineStats
from answerbox.services import Services

from tests.support.processors import LabelConfig, LabelHits, OnlyTitle, OnlyTitleConfig

NO_SERVICES = cast(Services, None)  # these processors use none
LIMITS = Limits(max_llm_calls=5, render_budget_s=0.5)


def _pipeline(*, budget_from_pipeline: bool) -> Pipeline:
    return Pipeline(
        id="p",
        request_processors=[OnlyTitle(OnlyTitleConfig(title="Dune"), NO_SERVICES)],
        response_processors=[LabelHits(LabelConfig(tag="l", label="seen"), NO_SERVICES)],
        native=None,
        stats=PipelineStats(),
        timeout_s=30.0,
        budget_s=8.0,
        budget_from_pipeline=budget_from_pipeline,
        conversation=OnlyTitle(OnlyTitleConfig(tag="memory", title="x"), NO_SERVICES),
    )


async def test_each_step_has_its_share_and_the_budget_its_source() -> None:
    plan = (await plan_of(_pipeline(budget_from_pipeline=False), None, LIMITS)).plan
    assert (plan.budget_s.value, plan.budget_s.source) == (8.0, "settings")
    assert [(s.processor, s.phase, s.share, s.added) for s in plan.steps] == [
        ("only_title", "request", 0.5, None),
        ("label_hits:l", "response", 0.5, None),
    ]
    assert plan.in_opensearch == []
    # The request's budgets, which admission hands its tasks.
    assert (plan.llm_calls.value, plan.render_cpu_s.value, plan.llm_calls.source) == (5, 0.5, "settings")
    assert (await plan_of(_pipeline(budget_from_pipeline=True), None, LIMITS)).plan.budget_s.source == "pipeline"


async def test_a_memory_adds_the_conversation_step_first_and_the_plan_says_why() -> None:
    plan = (await plan_of(_pipeline(budget_from_pipeline=False).for_conversation(), None, LIMITS)).plan
    assert [s.processor for s in plan.steps] == ["only_title:memory", "only_title", "label_hits:l"]
    assert "memory_id" in (plan.steps[0].added or "")
    assert [s.added for s in plan.steps[1:]] == [None, None]
    assert [s.share for s in plan.steps] == [0.3333, 0.3333, 0.3333]
