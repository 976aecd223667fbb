"""CRAG's knowledge refinement: decompose passages into strips, filter them with the evaluator, recompose.

A strip is a ``Span`` of its passage. A passage of one or two sentences is one strip; a
longer one is cut into strips of ``sentences_per_strip`` consecutive sentences (CRAG,
§4.3). All strips of a refinement are scored in one evaluator call; those scoring at least
``threshold`` compete for ``top_k`` places, and the winners come back in document order
(hit order, then field, then offset), each with the offsets that give back its exact text:
``_source[field][start:end] == text``. ``whole`` keeps each passage as one strip, with the
score it has, for a pipeline whose later steps read passages (``retrieval_evaluator``'s ``refine``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from answerbox.core.contract import KnowledgeStrip
from answerbox.processors.text.sentences import sentence_spans
from answerbox.processors.text.spans import Passage, Span

if TYPE_CHECKING:
    from answerbox.models import Evaluator

__all__ = ["decompose", "refine", "select", "whole"]


def decompose(passage: Passage, sentences_per_strip: int) -> list[Span]:
    spans = sentence_spans(passage.text)
    step = len(spans) if len(spans) <= 2 else sentences_per_strip
    return [
        passage.span(group[0][0], group[-1][1])
        for group in (spans[i : i + step] for i in range(0, len(spans), step or 1))
    ]


def select(strips: Sequence[Span], scores: Sequence[float], *, top_k: int, threshold: float) -> list[KnowledgeStrip]:
    """The ``top_k`` best strips scoring at least ``threshold``, back in their original order."""
    eligible = [i for i, score in enumerate(scores) if score >= threshold]
    best = sorted(eligible, key=lambda i: scores[i], reverse=True)[:top_k]
    return [strips[i].wire(KnowledgeStrip, text=strips[i].text, score=round(scores[i], 4)) for i in sorted(best)]


def whole(passages: Sequence[tuple[Passage, float]], *, top_k: int, threshold: float) -> list[KnowledgeStrip]:
    """Each passage as one strip with the score it already has: no decomposition, no model call."""
    strips = [passage.span(0, len(passage.text)) for passage, _ in passages]
    return select(strips, [score for _, score in passages], top_k=top_k, threshold=threshold)


async def refine(
    evaluator: Evaluator,
    question: str,
    passages: Sequence[Passage],
    *,
    sentences_per_strip: int,
    top_k: int,
    threshold: float,
) -> list[KnowledgeStrip]:
    strips = [strip for passage in passages for strip in decompose(passage, sentences_per_strip)]
    scores = await evaluator.score(question, [strip.text for strip in strips])
    return select(strips, scores, top_k=top_k, threshold=threshold)
