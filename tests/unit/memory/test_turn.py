"""A turn as ml-commons stores it: strings only in additional_info, an abstention as one."""

from __future__ import annotations

import json

from answerbox.core.contract import Answer, Citation, ConversationReport
from answerbox.memory.records import Interaction
from answerbox.memory.turn import interaction

REPORT = ConversationReport(
    memory_id="m",
    question="Where was it played?",
    standalone_question="Where was Super Bowl 50 played?",
    method="rules",
)


def test_an_answer_is_stored_with_its_citations_as_json_text() -> None:
    cited = Citation(
        index="books", id="sb50", field="text", start=10, end=24, marker=1, quote="Levi's Stadium", support=0.9
    )
    message = interaction(
        REPORT, Answer(text="Levi's Stadium [1]", citations=[cited], mode="extractive", confidence=0.81234)
    )
    assert message.input == "Where was it played?"
    assert message.response == "Levi's Stadium [1]"
    assert message.origin == "answerbox"
    info = message.additional_info or {}
    assert all(isinstance(v, str) for v in info.values())
    assert info["standalone_question"] == "Where was Super Bowl 50 played?"
    assert info["rewrite"] == "rules"
    assert info["abstained"] == "false"
    assert info["confidence"] == "0.8123"
    assert json.loads(info["citations"]) == [
        {"_index": "books", "_id": "sb50", "field": "text", "start": 10, "end": 24}
    ]


def test_an_abstention_is_stored_with_no_response_and_its_reason() -> None:
    held_back = Answer(
        text="The search results do not support an answer.", mode="extractive", abstained=True, reason="low_confidence"
    )
    for answer in (held_back, None):
        message = interaction(REPORT, answer)
        info = message.additional_info or {}
        assert message.response == ""
        assert info["abstained"] == "true"
        assert info["citations"] == "[]"
        assert info.get("reason") == (answer.reason if answer else None)


def test_an_earlier_turn_is_read_by_its_standalone_question() -> None:
    stored = {
        "message_id": "x",
        "input": "Where was it played?",
        "response": None,
        "additional_info": {"standalone_question": "Where was SB50 played?"},
    }
    assert Interaction.from_message(stored).question == "Where was SB50 played?"
    assert (
        Interaction.from_message({"message_id": "y", "input": "Who won?", "additional_info": None}).question
        == "Who won?"
    )
