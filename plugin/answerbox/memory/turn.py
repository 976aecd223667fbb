"""A search's turn of a conversation: what the engine read from its memory before the processors
ran, and the interaction it stores once the answer is written."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from answerbox.core.contract import Answer, ConversationReport
from answerbox.memory.records import MAX_MESSAGE_CHARS, Interaction, NewMessage

__all__ = ["ORIGIN", "ConversationTurn", "interaction"]

# ``origin`` of every interaction answerbox stores.
ORIGIN = "answerbox"


@dataclass(kw_only=True)
class ConversationTurn:
    memory_id: str
    message_size: int
    history: list[Interaction] = field(default_factory=list)  # oldest first


def interaction(report: ConversationReport, answer: Answer | None) -> NewMessage:
    """The turn as ml-commons stores one: ``additional_info`` holds strings only, so the citations
    (index, id, field and span of each) are JSON text. An abstention is stored as one, with an
    empty response, so the next turn knows there was no answer. The texts are cut to what a
    message holds: the turn is stored, never refused for its size."""
    answered = answer if answer is not None and not answer.abstained else None
    info = {
        "standalone_question": report.standalone_question[:MAX_MESSAGE_CHARS],
        "rewrite": report.method,
        "abstained": json.dumps(answered is None),
        "citations": json.dumps(
            [
                {"_index": c.index, "_id": c.id, "field": c.field, "start": c.start, "end": c.end}
                for c in answered.citations
            ]
            if answered
            else []
        ),
    }
    if answer is not None and answer.reason is not None:
        info["reason"] = answer.reason
    if answered is not None and answered.confidence is not None:
        info["confidence"] = f"{answered.confidence:.4f}"
    return NewMessage(
        input=report.question[:MAX_MESSAGE_CHARS],
        response=answered.text[:MAX_MESSAGE_CHARS] if answered else "",
        origin=ORIGIN,
        additional_info=info,
    )
