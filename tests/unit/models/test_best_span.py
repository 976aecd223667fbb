"""The reader's span choice over one window's logits, with hand-made numbers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from answerbox.core.errors import ModelError
from answerbox.models.encoder import WindowOutput
from answerbox.models.manifest import ModelManifest
from answerbox.models.reader import BestSpan, answer_gap, best_span
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


def _covered(start: list[float], end: list[float], first: int, last: int) -> float:
    return sum(_softmax(start, i) * _softmax(end, j) for i in range(first, last + 1) for j in range(i, last + 1))


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
            covered=_covered(chunk_start, chunk_end, 1, 2),  # p1, p1..p2 and p2
            over_no_answer=(3.0 + 2.0) - (1.0 + 0.5),  # p1..p2 against [CLS]'s start+end
        )
    )


def test_a_reader_that_prefers_no_answer_says_so_by_a_negative_gap() -> None:
    found = best_span(_output([8.0, 0, 0, 1.0, 0, 0, 0], [8.0, 0, 0, 1.0, 0, 0, 0]), max_answer_tokens=1)
    assert found is not None
    assert (found.first, found.last, found.over_no_answer) == (3, 3, 2.0 - 16.0)


# In the chunk: start+end of p0..p2 is 4.5 against the best, p1..p2, at 5.0; p0..p1 is 3.5.
COVER_START = [0.0, 0, 0, 2.5, 3.0, 0.0, 0]
COVER_END = [0.0, 0, 0, 0.0, 1.0, 2.0, 0]


@pytest.mark.parametrize(
    ("margin", "max_answer_tokens", "shown"),
    [
        (0.0, 30, (4, 5)),  # the best span alone
        (0.4, 30, (4, 5)),  # p0..p2 is 0.5 behind: not near enough
        (0.6, 30, (3, 5)),  # near enough: the shown span covers both boundaries
        (1.5, 2, (4, 5)),  # p0..p1 is near too, but covering it would run past 2 tokens
    ],
)
def test_a_cover_margin_widens_the_span_to_the_near_best_boundaries(
    margin: float, max_answer_tokens: int, shown: tuple[int, int]
) -> None:
    found = best_span(_output(COVER_START, COVER_END), max_answer_tokens, margin)
    assert found is not None
    assert (found.first, found.last) == shown
    chunk_start, chunk_end = COVER_START[3:6], COVER_END[3:6]
    assert found.probability == pytest.approx(_softmax(chunk_start, 1) * _softmax(chunk_end, 2))
    assert found.covered == pytest.approx(_covered(chunk_start, chunk_end, shown[0] - 3, shown[1] - 3))


def test_a_manifest_without_a_cover_shows_the_best_span_and_refuses_a_negative_one(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps({"task": "reader-evaluator", "variants": {}}))
    assert ModelManifest.load(tmp_path).span_cover_margin == 0.0
    for margin in (-1.0, "1", math.nan):
        with pytest.raises(ModelError, match="span_cover_margin"):
            ModelManifest(task="reader-evaluator", variants={}).replace(span_cover_margin=margin)


# A passage whose words sit at WINDOW's offsets: p0 = "Alma", p1 = "Bert", p2 = "Cleo".
PASSAGE = "Alma Bert Cleo"


@pytest.mark.parametrize(
    ("answer", "max_answer_tokens", "gap"),
    [
        ("Bert Cleo", 30, 0.0),  # the reader's best span itself (start+end 5.0)
        ("alma bert.", 30, 1.5),  # p0..p1, 3.5: case and a closing full stop aside
        ("Cleo", 30, 3.0),  # p2 alone, 2.0
        ("Alma Bert Cleo", 2, None),  # longer than the reader may answer
        ("lma", 30, None),  # inside a word: not a span the reader could give
        ("Dora", 30, None),  # not in the passage
    ],
)
def test_the_gap_between_the_best_span_and_an_answer_the_window_holds(
    answer: str, max_answer_tokens: int, gap: float | None
) -> None:
    assert answer_gap(_output(COVER_START, COVER_END), PASSAGE, answer, max_answer_tokens) == (
        pytest.approx(gap) if gap is not None else None
    )
