"""What the calibrator's record says per kind of question: a pooled fit can be right overall
and off, in opposite directions, on the answerable questions and where the paragraph is gone."""

from __future__ import annotations

import pytest

from onnx_models.calibrate.answer_confidence import by_kind


def test_each_kind_reports_its_own_gap() -> None:
    rows = [
        {"kind": "answerable", "right": True},
        {"kind": "answerable", "right": True},
        {"kind": "removed", "right": False},
        {"kind": "removed", "right": False},
    ]
    # 0.5 everywhere: right overall on average, low on one kind and high on the other.
    found = by_kind(rows, [0.5, 0.5, 0.5, 0.5])
    assert found["answerable"]["overconfidence"] == pytest.approx(-0.5)
    assert found["removed"]["overconfidence"] == pytest.approx(0.5)
    assert found["answerable"]["ece"] == pytest.approx(0.5)
    assert found["removed"]["ece"] == pytest.approx(0.5)
