"""The extractive reader: one answer span per passage, with a DPR-style relevance confidence."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from answerbox.core.errors import ModelError
from answerbox.models.encoder import PassageEncoder, WindowOutput

__all__ = ["BestSpan", "Reader", "ReaderSpan", "best_span", "span_band"]


@dataclass(frozen=True, slots=True)
class ReaderSpan:
    """``passage[start:end] == text``; ``text == ""`` only when the passage has no tokens.

    Like DPR's reader, a span is always extracted (SearChain's completion step uses it
    whatever the confidence); whether to believe it is the caller's call:
    ``confidence`` is the relevance logit of the chosen window (SearChain's f, compare
    with ``manifest.theta``); ``probability`` is the best span's own, softmax(start) ×
    softmax(end) over that window's passage tokens, ``covered_probability`` the same summed
    over every span inside ``text`` (the reader's own chance that the answer lies within what
    it shows), and ``over_no_answer`` the best span's start+end logit less the window's
    no-answer logit (all three signals of ``answer.confidence``).
    """

    text: str
    start: int
    end: int
    confidence: float
    probability: float = 0.0
    covered_probability: float = 0.0
    over_no_answer: float = 0.0


class BestSpan(NamedTuple):
    first: int  # token indices in the window
    last: int
    probability: float  # the best span's softmax(start) × softmax(end) over the passage tokens
    covered: float  # the same summed over the allowed spans inside first..last
    over_no_answer: float  # start+end logit less [CLS]'s: training points unanswerable windows there


def span_band(length: int, max_answer_tokens: int) -> npt.NDArray[np.bool_]:
    """[start, end] → whether the reader may answer with that span: start <= end < start +
    max_answer_tokens, a band above the diagonal (training's span loss decodes the same)."""
    offsets = np.arange(length)[None, :] - np.arange(length)[:, None]
    return (offsets >= 0) & (offsets < max_answer_tokens)


def best_span(output: WindowOutput, max_answer_tokens: int, cover_margin: float = 0.0) -> BestSpan | None:
    """The span with the best start+end logit inside the passage chunk, widened to cover every
    span that overlaps it within ``cover_margin`` of its logit (while the cover stays within
    ``max_answer_tokens``). Annotators draw an answer's boundary differently and the reader's
    best guess at it is often a word short; showing the near-best boundaries too holds the
    whole answer more often (onnx_models/LOG.md, "The span that covers the near-best ones")."""
    w = output.window
    if output.start_logits is None or output.end_logits is None:
        raise ModelError("this model has no span head: it can score passages but not read them")
    if w.context_end < w.context_start:
        return None
    lo, hi = w.context_start, w.context_end + 1
    start = output.start_logits[lo:hi]
    end = output.end_logits[lo:hi]
    scores: npt.NDArray[np.float32] = start[:, None] + end[None, :]
    n = hi - lo
    scores = np.where(span_band(n, max_answer_tokens), scores, -np.inf)
    flat = int(np.argmax(scores))
    s, e = divmod(flat, n)
    best = float(scores[s, e])
    normaliser = _log_sum_exp(start) + _log_sum_exp(end)
    first, last = s, e
    if cover_margin > 0:
        starts, ends = np.nonzero(scores >= best - cover_margin)
        overlapping = (starts <= e) & (ends >= s)
        wide = int(starts[overlapping].min()), int(ends[overlapping].max())
        if wide[1] - wide[0] < max_answer_tokens:
            first, last = wide
    inside = scores[first : last + 1, first : last + 1]
    covered = float(np.sum(np.exp(inside.astype(np.float64) - normaliser)))
    no_answer = float(output.start_logits[0] + output.end_logits[0])
    return BestSpan(lo + first, lo + last, math.exp(best - normaliser), covered, best - no_answer)


def _log_sum_exp(logits: npt.NDArray[np.float32]) -> float:
    top = float(np.max(logits))
    return top + math.log(float(np.sum(np.exp(logits.astype(np.float64) - top))))


class Reader:
    def __init__(self, encoder: PassageEncoder, *, max_answer_tokens: int, cover_margin: float = 0.0) -> None:
        self._encoder = encoder
        self._max_answer_tokens = max_answer_tokens
        self._cover_margin = cover_margin

    async def read(self, question: str, passages: Sequence[str]) -> list[ReaderSpan]:
        """One span per passage, in order."""
        if not passages:
            return []
        per_passage = await self._encoder.encode(question, passages)
        return [self._span(passage, outputs) for passage, outputs in zip(passages, per_passage, strict=True)]

    def _span(self, passage: str, outputs: list[WindowOutput]) -> ReaderSpan:
        # DPR: the most relevant window is the one read; its relevance is the confidence.
        chosen = max(outputs, key=lambda o: o.relevance)
        found = best_span(chosen, self._max_answer_tokens, self._cover_margin)
        if found is None:
            return ReaderSpan("", 0, 0, confidence=chosen.relevance)
        offsets = chosen.window.offsets
        start, end = offsets[found.first][0], offsets[found.last][1]
        return ReaderSpan(
            passage[start:end],
            start,
            end,
            confidence=chosen.relevance,
            probability=found.probability,
            covered_probability=found.covered,
            over_no_answer=found.over_no_answer,
        )
