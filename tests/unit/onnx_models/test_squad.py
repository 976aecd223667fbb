"""A right answer cut short is told from a right answer and from another answer."""

from __future__ import annotations

import pytest

from onnx_models.data.squad import cut_short

GOLDS = ("the Rural Housing Stability Program", "Rural Housing Stability Program")


@pytest.mark.parametrize(
    ("said", "short"),
    [
        ("Rural Housing Stability", True),  # inside every gold, holding none
        ("Housing", True),
        ("Rural Housing Stability Program", False),  # right
        ("the Rural Housing Stability Program of 2019", False),  # right, if long
        ("Stability Program began", False),  # overlaps, but not inside a gold
        ("", False),
        ("the", False),  # normalised away
    ],
)
def test_a_span_inside_a_gold_answer_that_holds_none_is_cut_short(said: str, short: bool) -> None:
    assert cut_short(said, GOLDS) is short
