"""Each step runs with its plan, not its config: given a plan that differs from what its config
would resolve to, every processor does what the plan says (``pipeline/run/plan.py``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from answerbox.core.contract import ConversationReport
from answerbox.memory.records import Interaction
from answerbox.memory.turn import ConversationTurn
from answerbox.opensearch import JSON, Caller
from answerbox.pipeline.base import (
    PipelineContext,
    Planning,
    Processor,
    RequestProcessor,
    ResponseProcessor,
    SearchRequest,
    Sourced,
)
from answerbox.pipeline.limits.request_limits import ConfigContext
from answerbox.processors.chain_of_query import ChainOfQuery
from answerbox.processors.conversation import Conversation
from answerbox.processors.query_expansion import LLMQueryExpansion
from answerbox.processors.retrieval_evaluator import RetrievalEvaluator

from tests.unit.fake_services import FakeEvaluator, FakeReader, FakeServices, fake_models
from tests.unit.fakes import pipeline_context, response_of
from tests.unit.processors.cited_answer.books import HITS, QUESTION, answer_services, answerer, context, request


async def _run(processor: Processor[Any], ctx: PipelineContext, req: SearchRequest, **plan: Any) -> JSON:
    """``processor`` run with its own plan changed by ``plan``."""
    ctx.plans[processor] = replace(await processor.plan(Planning(qa=ctx.generative_qa)), **plan)
    if isinstance(processor, RequestProcessor):
        return (await processor.process_request(req, ctx)).body
    assert isinstance(processor, ResponseProcessor)
    return await processor.process_response(req, response_of(HITS), ctx)


async def test_the_evaluator_scores_and_judges_as_its_plan_says() -> None:
    services = FakeServices(models=fake_models(evaluator=FakeEvaluator(lambda q, p: 0.5)))
    processor = RetrievalEvaluator.from_dict({"top_n": 10, "corrective": None}, services, ConfigContext())
    ctx = pipeline_context(question=QUESTION)
    await _run(processor, ctx, request(), top_n=Sourced(1, "request"), upper=Sourced(0.9, "pipeline"))
    assert ctx.report.retrieval is not None
    assert (len(ctx.report.retrieval.scores), ctx.report.retrieval.upper) == (1, 0.9)
    assert ctx.report.retrieval.verdict == "ambiguous"  # 0.5 < the plan's upper


async def test_cited_answer_answers_as_its_plan_says() -> None:
    services = answer_services()
    ctx = context()
    await _run(answerer(services, mode="generative"), ctx, request(), mode=Sourced("extractive", "settings"))
    assert services.llm.calls == []  # the plan's mode, not the config's
    assert ctx.report.answer is not None
    assert ctx.report.answer.mode == "extractive"


async def test_the_chain_skips_itself_as_its_plan_says() -> None:
    services = FakeServices(models=fake_models(FakeReader(["Frank Herbert"])))
    processor = ChainOfQuery.from_dict({"skip_llm_above": 1}, services, ConfigContext())
    ctx = context()
    await _run(processor, ctx, request(), skip_llm_above=Sourced(0.0, "pipeline"))
    assert (ctx.report.llm_skipped, services.llm.calls) == (["chain_of_query"], [])


async def test_query_expansion_asks_the_plans_model() -> None:
    services = FakeServices(replies=["sand worms"], llm={"allowed_models": ["planned"]})
    processor = LLMQueryExpansion.from_dict({}, services, ConfigContext())
    assert isinstance(processor, LLMQueryExpansion)
    ctx = pipeline_context(question=QUESTION)
    await _run(processor, ctx, request(), model=Sourced("planned", "request"))
    assert [call.model for call in services.llm.calls] == ["planned"]


async def test_without_an_llm_in_its_plan_the_conversation_takes_the_rules() -> None:
    services = FakeServices(replies=['{"question": "never asked"}'])
    processor = Conversation.from_dict({"rewrite": "auto"}, services, ConfigContext())
    first = Interaction(message_id="m0", input="Who won Super Bowl 50?", response="The Denver Broncos")
    ctx = pipeline_context(
        question="Where was it played?", conversation=ConversationTurn(memory_id="m", message_size=5, history=[first])
    )
    ctx.report.conversation = ConversationReport(memory_id="m", question="q", standalone_question="q")
    req = SearchRequest(
        index="b", body={"query": {"match": {"text": "Where was it played?"}}}, params={}, caller=Caller()
    )
    await _run(processor, ctx, req, model=None, timeout_s=None)
    assert (services.llm.calls, ctx.report.conversation.method) == ([], "rules")
