"""The extractive reader: one answer span per passage, with a DPR-style relevance confidence."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from answerbox.core.errors import ModelError
from answerbox.models.encoder import PassageEncoder, WindowOutput

__all__ = ["BestSpan", "Reader", "ReaderSpan", "answer_gap", "best_span", "span_band"]


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
    if (chunk := _chunk_logits(output)) is None:
        return None
    start, end, no_answer = chunk
    scores = _span_scores(start, end, max_answer_tokens)
    lo, n = output.window.context_start, len(start)
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
    return BestSpan(lo + first, lo + last, math.exp(best - normaliser), covered, best - no_answer)


def answer_gap(output: WindowOutput, passage: str, answer: str, max_answer_tokens: int) -> float | None:
    """How many logits (start+end) the window's best span scores above ``answer`` where the window
    holds it (its best occurrence as whole words, case aside): 0 when ``answer`` is the reader's
    own best span, None when the window's passage chunk does not hold it as a span the reader
    could give."""
    wanted = answer.strip().rstrip(".")
    if (chunk := _chunk_logits(output)) is None or not wanted:
        return None
    scores = _span_scores(chunk.start, chunk.end, max_answer_tokens)
    w = output.window
    offsets = np.array(w.offsets[w.context_start : w.context_end + 1]).reshape(-1, 2)
    found = []  # the score of each occurrence whose tokens the chunk holds whole
    for match in re.finditer(rf"(?<!\w){re.escape(wanted)}(?!\w)", passage, re.IGNORECASE):
        inside = np.nonzero((offsets[:, 1] > match.start()) & (offsets[:, 0] < match.end()))[0]
        if inside.size and offsets[inside[0], 0] <= match.start() and offsets[inside[-1], 1] >= match.end():
            found.append(float(scores[inside[0], inside[-1]]))
    best_found = max(found, default=-np.inf)
    return float(np.max(scores)) - best_found if np.isfinite(best_found) else None


class _Chunk(NamedTuple):
    start: npt.NDArray[np.float32]  # the start and end logits of the passage chunk's tokens
    end: npt.NDArray[np.float32]
    no_answer: float  # [CLS]'s start+end logit: training points unanswerable windows there


def _chunk_logits(output: WindowOutput) -> _Chunk | None:
    """The span logits of the window's passage chunk; None for a window with no passage tokens."""
    if output.start_logits is None or output.end_logits is None:
        raise ModelError("this model has no span head: it can score passages but not read them")
    w = output.window
    if w.context_end < w.context_start:
        return None
    lo, hi = w.context_start, w.context_end + 1
    no_answer = float(output.start_logits[0] + output.end_logits[0])
    return _Chunk(output.start_logits[lo:hi], output.end_logits[lo:hi], no_answer)


def _span_scores(
    start: npt.NDArray[np.float32], end: npt.NDArray[np.float32], max_answer_tokens: int
) -> npt.NDArray[np.float32]:
    """start+end logit of every span [first, last] of a chunk, -inf outside the band the reader answers from."""
    return np.where(span_band(len(start), max_answer_tokens), start[:, None] + end[None, :], -np.inf)


def _read_window(outputs: list[WindowOutput]) -> WindowOutput:
    """DPR: the most relevant window is the one read; its relevance is the confidence."""
    return max(outputs, key=lambda o: o.relevance)


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
        return [
            self._span(passage, _read_window(outputs)) for passage, outputs in zip(passages, per_passage, strict=True)
        ]

    async def read_answer(self, question: str, passage: str, answer: str | None) -> tuple[ReaderSpan, float | None]:
        """The span in ``passage`` and, from the same window, ``answer_gap`` of ``answer`` (None
        without one): how far below its own span the reader rates someone else's answer."""
        (outputs,) = await self._encoder.encode(question, [passage])
        chosen = _read_window(outputs)
        gap = answer_gap(chosen, passage, answer, self._max_answer_tokens) if answer else None
        return self._span(passage, chosen), gap

    def _span(self, passage: str, chosen: WindowOutput) -> ReaderSpan:
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
