"""The conversation processor in process, without an LLM: what it rewrites in the search, what it
leaves, and what it reports."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from answerbox.core.config import Settings
from answerbox.core.contract import ConversationReport
from answerbox.llm import LLMClient
from answerbox.memory.records import Interaction
from answerbox.memory.turn import ConversationTurn
from answerbox.opensearch import Caller
from answerbox.pipeline.base import PipelineContext, SearchRequest
from answerbox.pipeline.limits.request_limits import ConfigContext
from answerbox.processors.conversation import Conversation
from answerbox.processors.conversation.processor import _about
from answerbox.processors.conversation.rules import standalone
from answerbox.prompts.library import PromptLibrary
from answerbox.services import Services
from answerbox.shared_cache import SharedCache

from tests.support.repo import REPO_ROOT
from tests.unit.fakes import pipeline_context, requested

FIRST = Interaction(message_id="m0", input="Who won Super Bowl 50?", response="The Denver Broncos")


def _processor(**config: Any) -> Conversation:
    settings = Settings(templates_dir=REPO_ROOT / "templates")  # no llm.base_url: no LLM configured
    prompts = PromptLibrary(settings.templates_dir)
    services = Services(settings, LLMClient(settings.llm, prompts), prompts, SharedCache(None, "unused"))  # type: ignore[arg-type]
    processor = Conversation.from_dict(config, services, ConfigContext())
    assert isinstance(processor, Conversation)
    return processor


def _context(question: str, history: list[Interaction]) -> PipelineContext:
    ctx = pipeline_context(
        question=question, conversation=ConversationTurn(memory_id="m", message_size=10, history=history)
    )
    ctx.report.conversation = ConversationReport(
        memory_id="m", question=question, standalone_question=question, history=len(history)
    )
    return ctx


def _request(question: str) -> SearchRequest:
    body = {"query": {"bool": {"must": [{"match": {"text": question}}], "filter": [{"term": {"tenant": question}}]}}}
    return SearchRequest(index="docs", body=body, params={"q": question}, caller=Caller())


def test_a_follow_up_asks_its_standalone_question_and_the_filters_stay_as_written() -> None:
    ctx = _context("Where was it played?", [FIRST])
    sent = asyncio.run(requested(_processor(), _request("Where was it played?"), ctx))
    query = sent.body["query"]["bool"]
    assert query["must"][0]["match"]["text"].startswith("Where was Super Bowl 50 played?")
    assert "won" in query["must"][0]["match"]["text"]  # the earlier question's words, for the search
    assert query["filter"] == [{"term": {"tenant": "Where was it played?"}}]  # a restriction is never rewritten
    assert sent.params["q"] == query["must"][0]["match"]["text"]
    assert ctx.question == "Where was Super Bowl 50 played?"
    assert ctx.report.conversation is not None
    assert ctx.report.conversation.method == "rules"


@pytest.mark.parametrize(
    ("question", "history"),
    [
        ("Where was it played?", []),  # nothing earlier
        ("Who founded the Normans in France?", [FIRST]),  # stands alone
    ],
)
def test_what_needs_no_rewrite_goes_on_untouched(question: str, history: list[Interaction]) -> None:
    request, ctx = _request(question), _context(question, history)
    assert asyncio.run(requested(_processor(), request, ctx)) is request
    assert ctx.question == question
    assert ctx.report.conversation is not None
    assert ctx.report.conversation.method == "none"


def test_without_a_memory_it_does_nothing() -> None:
    request = _request("Where was it played?")
    ctx = pipeline_context(question="Where was it played?")
    assert asyncio.run(requested(_processor(rewrite="rules"), request, ctx)) is request
    assert ctx.report.conversation is None


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        ("Where was Super Bowl 50 played?", True),
        ("At which stadium was Super Bowl 50 played?", True),
        ("the rewritten question", False),  # the prompt's words, copied
        ("The Denver Broncos.", False),  # an answer, not the question
        ("Where was it played?", False),  # the subject dropped
    ],
)
def test_the_llms_rewrite_is_kept_only_when_it_is_this_question_about_the_subject(written: str, kept: bool) -> None:
    question = "Where was it played?"
    assert _about(written, question, standalone(question, FIRST.question)) is kept


def test_a_rewrite_that_asks_something_else_is_not_kept() -> None:
    question = "In what area has it conducted research?"
    rules = standalone(question, "Where does Raymond L. Cohn teach?")
    assert _about("In what area has Raymond L. Cohn conducted research?", question, rules)
    assert not _about("What subject does Raymond L. Cohn teach?", question, rules)
