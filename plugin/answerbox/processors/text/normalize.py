"""SQuAD answer normalisation, the containment test SearChain uses to compare answers, and what
*right* means for ``answer.confidence`` (``contains_gold``).

The one copy of the official SQuAD v1.1 normalisation: ``onnx_models`` (training, selection)
and the benches import it from here, so what the models are chosen by is what the processors use.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

__all__ = ["contains_answer", "contains_gold", "normalize_answer"]

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """Lowercase, drop punctuation and articles, collapse whitespace (SQuAD v1.1)."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def contains_answer(span: str, answer: str) -> bool:
    """Whether the normalised ``span`` stands in the normalised ``answer`` as whole words.

    Whole words, so that a reader span "1" does not agree with an answer "1989".
    """
    needle = normalize_answer(span)
    return bool(needle) and f" {needle} " in f" {normalize_answer(answer)} "


def contains_gold(text: str, answers: Sequence[str]) -> bool:
    """Whether ``text`` holds one of the gold ``answers``, both normalised as SQuAD scores: an
    answer is *right* by this, in the calibrator's fit, the benches and ``answerbox threshold``."""
    normalized = normalize_answer(text)
    return any(gold and gold in normalized for gold in map(normalize_answer, answers))
