"""SQuAD answer normalisation, and the containment test SearChain uses to compare answers.

The one copy of the official SQuAD v1.1 normalisation: ``onnx_models`` (training, selection)
and the benches import it from here, so what the models are chosen by is what the processors use.
"""

from __future__ import annotations

import re
import string

__all__ = ["contains_answer", "normalize_answer"]

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
