"""Whether an answer has the shape its question asks for: cheap signs of a span read from the wrong place.

A "how many" question answered without a number, a "who" question answered without a name,
or an answer made of the question's own words is usually wrong. These signs carry across
domains where the models' scores drift: with them the answer-confidence calibrator fitted on
one training file and applied to the other is better calibrated (``onnx_models/LOG.md``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from answerbox.processors.text.words import FUNCTION_WORDS

__all__ = ["AnswerShape", "answer_shape"]

_NUMBER_QUESTION = re.compile(r"\b(how (many|much|long|old)|what (year|percentage|age)|when)\b")
_PERSON_QUESTION = re.compile(r"\b(who|whom|whose)\b")
_WORD = re.compile(r"[a-z0-9]+")
_DIGIT = re.compile(r"\d")


@dataclass(frozen=True, slots=True)
class AnswerShape:
    question_overlap: float  # share of the answer's content words the question already says
    asks_number: bool
    has_number: bool  # a digit
    asks_person: bool
    has_name: bool  # a capitalised word


def answer_shape(question: str, answer: str) -> AnswerShape:
    asked = set(_WORD.findall(question.lower())) - FUNCTION_WORDS
    said = [w for w in _WORD.findall(answer.lower()) if w not in FUNCTION_WORDS]
    lowered = question.lower()
    return AnswerShape(
        question_overlap=sum(w in asked for w in said) / max(1, len(said)),
        asks_number=bool(_NUMBER_QUESTION.search(lowered)),
        has_number=bool(_DIGIT.search(answer)),
        asks_person=bool(_PERSON_QUESTION.search(lowered)),
        has_name=any(w[:1].isupper() for w in answer.split()),
    )
