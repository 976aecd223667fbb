"""The rules that make a follow-up standalone without an LLM."""

from __future__ import annotations

import pytest
from answerbox.processors.conversation.rules import Rewrite, entities, standalone


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Which NFL team represented the AFC at Super Bowl 50?", ["NFL", "AFC", "Super Bowl 50"]),
        ("What did the Normans do in Sicily?", ["Normans", "Sicily"]),
        ("When did Beyonce's first album come out?", ["Beyonce"]),
        ("In 1066, who invaded England?", ["1066", "England"]),
        ("what happened then", []),
    ],
)
def test_entities_are_runs_of_names_and_numbers_without_the_question_word(text: str, expected: list[str]) -> None:
    assert entities(text) == expected


def test_a_pronoun_becomes_the_earlier_questions_subject_and_the_search_keeps_its_topic() -> None:
    rewrite = standalone("Where was it played?", "Which NFL team represented the AFC at Super Bowl 50?")
    assert rewrite.question == "Where was Super Bowl 50 played?"
    assert rewrite.query.startswith(rewrite.question)
    assert {"NFL", "AFC", "team", "represented"} <= set(rewrite.query.split())
    assert rewrite.rewritten


def test_a_possessive_becomes_the_subjects_possessive() -> None:
    assert (
        standalone("What is its population?", "Where is New York City?").question
        == "What is New York City's population?"
    )


def test_a_follow_up_without_a_pronoun_to_replace_carries_the_subject_beside_it() -> None:
    rewrite = standalone("How many people live there?", "What is the capital of France?")
    assert rewrite.question == "How many people live there? (France)"
    assert "capital" in rewrite.query
    short = standalone("And the year?", "Who won Super Bowl 50?")
    assert short.question == "And the year? (Super Bowl 50)"


@pytest.mark.parametrize(
    ("question", "previous"),
    [
        ("Who founded the Normans in France?", "Who won Super Bowl 50?"),  # stands alone
        ("Where was it played?", ""),  # nothing earlier to carry
    ],
)
def test_a_question_that_refers_back_to_nothing_stays_as_asked(question: str, previous: str) -> None:
    assert standalone(question, previous) == Rewrite(question, question, False)


def test_without_any_name_the_earlier_content_words_are_carried() -> None:
    rewrite = standalone("When was it built?", "what is the tallest tower?")
    assert rewrite.question == "When was it built? (tallest tower)"
