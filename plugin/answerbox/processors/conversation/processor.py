"""``conversation``: the follow-up of a conversation made a standalone question before anything
reads it (query expansion, the search, the evaluator, the chain, the answer).

The engine reads the memory's last ``message_size`` interactions (``ctx.conversation``) before
the request processors run; this processor writes the standalone question with the LLM
(structured output, ``templates/conversation/standalone.j2``, within its share of the
budget) and falls back to the rules (``rules.py``) when there is no LLM, it fails or is slow,
or what it writes is not a question about this follow-up. The search's text clauses that
held the question get the standalone question and what the rules carried (``Rewrite.query``).
Without a memory it does nothing: a pipeline may hold it for every search.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from answerbox.core.errors import ConfigError, LLMError
from answerbox.core.query_text import find_text_clauses
from answerbox.llm.structured import Schema, from_json, object_schema, string
from answerbox.memory.records import Interaction
from answerbox.pipeline.base import (
    PipelineContext,
    Planning,
    ProcessorConfig,
    RequestProcessor,
    SearchRequest,
    Sourced,
    StepPlan,
    first_set,
)
from answerbox.pipeline.limits.request_limits import LLMModel, LLMTokens
from answerbox.pipeline.run.pipeline import CONVERSATION
from answerbox.processors.conversation.rules import Rewrite, content_words, entities, standalone
from answerbox.processors.text.instructions import addresses_the_model

if TYPE_CHECKING:
    from answerbox.services import Services

__all__ = ["Conversation", "ConversationConfig"]

_MAX_QUESTION = 300
_SCHEMA = Schema("standalone_question", object_schema(question=string(_MAX_QUESTION)))
_TEMPLATE = "conversation/standalone.j2"
# Earlier answers shown to the LLM are cut to this: the question's context, not its evidence.
_MAX_ANSWER_CHARS = 300
# Earlier questions, for the rules and the LLM, are cut to this: a memory's last turns (at most
# limits.max_message_size) then always fit the prompt, and an oversized one stored in an earlier
# memory slows no rewrite.
_MAX_EARLIER_QUESTION_CHARS = 1000


class _Reply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    question: str


class ConversationConfig(ProcessorConfig):
    # auto: the LLM where one is configured, the rules otherwise and whenever it fails; rules: never the LLM.
    rewrite: Literal["auto", "rules"] = "auto"
    model: LLMModel = None
    max_tokens: LLMTokens = Field(default=64, ge=8, le=512)
    timeout_s: float = Field(default=5.0, gt=0, le=60)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationPlan(StepPlan):
    model: Sourced[str] | None = None  # None: the rules alone, no LLM
    timeout_s: Sourced[float] | None = None


class Conversation(RequestProcessor[ConversationConfig]):
    type_name = CONVERSATION
    config_model = ConversationConfig
    budget_weight = 0.5

    def __init__(self, config: ConversationConfig, services: Services) -> None:
        super().__init__(config, services)
        try:
            self._prompt = services.prompts.get(_TEMPLATE)
            self._prompt.render(history=[], question="q", json=True)
        except ConfigError as exc:
            raise ConfigError(f"processor [{self.name}]: {exc.reason}") from exc

    async def process_request(self, request: SearchRequest, ctx: PipelineContext) -> SearchRequest:
        turn, report = ctx.conversation, ctx.report.conversation
        question = (ctx.question or "").strip()
        if turn is None or report is None or not turn.history or not question:
            return request
        rules = standalone(question, turn.history[-1].question[:_MAX_EARLIER_QUESTION_CHARS])
        if not rules.rewritten:
            return request
        plan = ctx.plan(self, ConversationPlan)
        llm = (plan.model.value, plan.timeout_s.value) if plan.model and plan.timeout_s else None
        written = await self._by_llm(question, turn.history, rules, llm, ctx) if llm else None
        rewrite = Rewrite(written, f"{written} {_missing(rules.query, written)}".strip(), True) if written else rules
        report.standalone_question, report.method = rewrite.question, "llm" if written else "rules"
        ctx.question = rewrite.question
        changed = request.copy()
        # The clauses that asked the question ask the standalone one; any other text stays.
        for clause in find_text_clauses(changed.body):
            if clause.text.strip() == question:
                clause.holder[clause.key] = rewrite.query
        if changed.params.get("q", "").strip() == question:
            changed.params["q"] = rewrite.query
        return changed

    async def plan(self, planning: Planning) -> ConversationPlan:
        if self.config.rewrite != "auto" or not self.services.llm.configured:
            return ConversationPlan()
        return ConversationPlan(
            model=first_set((self.config.model, "pipeline"), (self.services.settings.llm.model, "settings")),
            timeout_s=self.config.sourced("timeout_s", self.config.timeout_s),
        )

    async def _by_llm(
        self, question: str, history: list[Interaction], rules: Rewrite, llm: tuple[str, float], ctx: PipelineContext
    ) -> str | None:
        """The LLM's standalone question (``llm``: its model and timeout), or None (the rules' stands) with a
        warning why."""
        model, timeout = llm[0], min(llm[1], ctx.deadline.for_work())
        turns = [
            {
                "question": t.question[:_MAX_EARLIER_QUESTION_CHARS],
                "answer": "" if addresses_the_model(t.response) else t.response[:_MAX_ANSWER_CHARS],
            }
            for t in history
        ]
        try:
            structured = await self.services.llm.structured(timeout_s=timeout)
            prompt = await self._prompt.arender(history=turns, question=question, json=structured)
            completion = await self.services.llm.complete(
                [{"role": "user", "content": prompt}],
                max_tokens=self.config.max_tokens,
                model=model,
                timeout_s=timeout,
                schema=_SCHEMA if structured else None,
            )
        except LLMError as exc:
            self.warn(ctx, f"the rules made the question standalone: the LLM failed: {exc.reason}")
            return None
        reply = from_json(_Reply, completion.text) if structured else None
        said = reply.question if reply is not None else completion.text.split("\n")[0]
        text = " ".join(said.split())[:_MAX_QUESTION]
        if not _about(text, question, rules):
            self.warn(ctx, "the rules made the question standalone: the LLM's rewrite was not about this question")
            return None
        return text


def _content_words(text: str) -> set[str]:
    return {w.lower() for w in content_words(text)}


def _about(written: str, question: str, rules: Rewrite) -> bool:
    """Whether the LLM's rewrite is this question made standalone: it keeps every content word the
    follow-up asked with and names the subject the rules found. A small model answers instead,
    copies the prompt, drops the subject or asks another question (SmolLM2 did all four on
    held-out training articles, where its kept rewrites lost answers: ``bench/followup.py``)."""
    if not written or len(written) > 3 * len(rules.question) + 40:
        return False
    subjects = entities(rules.question)
    named = not subjects or any(s.lower() in written.lower() for s in subjects)
    return named and _content_words(question) <= _content_words(written)


def _missing(query: str, written: str) -> str:
    """The words the rules' query carried that the LLM's question lacks: retrieval keeps the topic."""
    has = {w.lower() for w in written.replace("?", " ").split()}
    return " ".join(dict.fromkeys(w for w in query.split() if w.lower().strip("?") not in has))
