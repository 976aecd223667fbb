"""A run's turn of a conversation (``ext.generative_qa_parameters.memory_id``): the memory's last
interactions read before the request processors, and this turn stored once the answer is written."""

from __future__ import annotations

from answerbox.core.contract import ConversationReport, GenerativeQAParameters
from answerbox.core.errors import AnswerboxError
from answerbox.memory import Memory
from answerbox.memory.turn import ConversationTurn, interaction
from answerbox.opensearch import Caller
from answerbox.pipeline.base import PipelineContext
from answerbox.pipeline.run.pipeline import Pipeline

__all__ = ["recall", "remember", "turn_of"]

# Earlier interactions a follow-up is read against when the search names no message_size
# (OpenSearch's RAG processor's default).
_MESSAGE_SIZE = 10


def turn_of(pipeline: Pipeline, qa: GenerativeQAParameters | None) -> ConversationTurn | None:
    """The turn answerbox keeps; None without a memory_id, or when OpenSearch's own RAG processor keeps it."""
    if qa is None or qa.memory_id is None or pipeline.native_rag:
        return None
    return ConversationTurn(memory_id=qa.memory_id, message_size=qa.message_size or _MESSAGE_SIZE)


async def recall(ctx: PipelineContext, memory: Memory, caller: Caller) -> None:
    """The conversation so far, before anything reads the question. A memory that is not the
    caller's (or not there) fails the search, as in OpenSearch: a 404."""
    turn = ctx.conversation
    if turn is None:
        return
    store = await memory.store()
    turn.history = await store.history(caller, turn.memory_id, turn.message_size)
    question = ctx.question or ""
    ctx.report.conversation = ConversationReport(
        memory_id=turn.memory_id, question=question, standalone_question=question, history=len(turn.history)
    )


async def remember(ctx: PipelineContext, memory: Memory, caller: Caller) -> None:
    """This turn into the memory, with the caller's credentials; a failure costs the
    conversation this turn (a warning), never the search's hits or answer."""
    turn, report = ctx.conversation, ctx.report.conversation
    if turn is None or report is None:
        return
    try:
        store = await memory.store()
        stored = await store.add_message(caller, turn.memory_id, interaction(report, ctx.report.answer))
    except AnswerboxError as exc:
        ctx.report.warn(f"this turn was not stored in memory [{turn.memory_id}]: {exc.reason}")
        return
    report.message_id = str(stored.get("message_id")) if stored.get("message_id") else None
