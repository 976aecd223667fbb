"""The answer's shape against its question's: what the confidence calibrator reads beside the models' scores."""

from __future__ import annotations

import pytest
from answerbox.processors.text.answer_shape import AnswerShape, answer_shape


@pytest.mark.parametrize(
    ("question", "answer", "shape"),
    [
        ("How many people live in Fresno?", "about 500,000", AnswerShape(0.0, True, True, False, False)),
        ("When was the bridge opened?", "after the war", AnswerShape(0.0, True, False, False, False)),
        ("Who designed the bridge?", "Joseph Strauss", AnswerShape(0.0, False, False, True, True)),
        ("Whose idea was the bridge?", "the city's engineer", AnswerShape(0.0, False, False, True, False)),
        ("What did the bridge replace?", "a ferry", AnswerShape(0.0, False, False, False, False)),
    ],
)
def test_what_the_question_asks_for_and_what_the_answer_has(question: str, answer: str, shape: AnswerShape) -> None:
    assert answer_shape(question, answer) == shape


def test_the_overlap_is_the_share_of_the_answers_content_words_the_question_says() -> None:
    # "golden" and "gate" are in the question, "strait" is not; "the" counts for neither.
    shape = answer_shape("Why is the Golden Gate red?", "the Golden Gate strait")
    assert shape.question_overlap == pytest.approx(2 / 3)
    assert answer_shape("Why is it red?", "the").question_overlap == 0.0  # no content word: nothing repeated
