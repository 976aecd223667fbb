"""The reader's span choice over one window's logits, with hand-made numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from answerbox.models.encoder import WindowOutput
from answerbox.models.reader import BestSpan, best_span
from answerbox.models.windows import Window

# [CLS] q [SEP] p0 p1 p2 [SEP]: the passage chunk is tokens 3..5.
WINDOW = Window(
    passage_index=0,
    ids=np.arange(7, dtype=np.int64),
    type_ids=np.array([0, 0, 0, 1, 1, 1, 1], dtype=np.int64),
    offsets=((0, 0), (0, 0), (0, 0), (0, 4), (5, 9), (10, 14), (0, 0)),
    context_start=3,
    context_end=5,
)


def _output(start: list[float], end: list[float]) -> WindowOutput:
    return WindowOutput(WINDOW, np.array(start, dtype=np.float32), np.array(end, dtype=np.float32), relevance=0.0)


def _softmax(logits: list[float], at: int) -> float:
    return math.exp(logits[at]) / sum(math.exp(x) for x in logits)


def test_the_best_span_in_the_chunk_and_how_far_it_beats_no_answer() -> None:
    start = [1.0, 9.0, 9.0, 0.0, 3.0, 1.0, 9.0]  # outside the chunk, 9s count for nothing
    end = [0.5, 9.0, 9.0, 0.0, 1.0, 2.0, 9.0]
    found = best_span(_output(start, end), max_answer_tokens=30)
    chunk_start, chunk_end = start[3:6], end[3:6]
    assert found == pytest.approx(
        BestSpan(
            first=4,
            last=5,
            probability=_softmax(chunk_start, 1) * _softmax(chunk_end, 2),
            over_no_answer=(3.0 + 2.0) - (1.0 + 0.5),  # p1..p2 against [CLS]'s start+end
        )
    )


def test_a_reader_that_prefers_no_answer_says_so_by_a_negative_gap() -> None:
    found = best_span(_output([8.0, 0, 0, 1.0, 0, 0, 0], [8.0, 0, 0, 1.0, 0, 0, 0]), max_answer_tokens=1)
    assert found is not None
    assert (found.first, found.last, found.over_no_answer) == (3, 3, 2.0 - 16.0)
