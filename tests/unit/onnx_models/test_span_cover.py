"""How the reader's span cover is chosen: the widest margin whose F1 stays near the best span's."""

from __future__ import annotations

import pytest

from onnx_models.calibrate.span_cover import choose, parse_args


def _table(*f1: float) -> dict[float, dict[str, float]]:
    return {margin: {"f1": value} for margin, value in zip((0.0, 0.5, 1.0, 1.5), f1, strict=True)}


@pytest.mark.parametrize(
    ("f1", "chosen"),
    [
        ((76.5, 76.3, 75.2, 73.6), 1.0),  # 1.5 costs 2.9 points
        ((76.5, 74.0, 73.0, 72.0), 0.0),  # every cover costs too much: the best span alone
        ((76.5, 74.0, 75.5, 72.0), 1.0),  # the widest within the loss, not the first to miss it
    ],
)
def test_the_widest_margin_within_the_f1_loss_wins(f1: tuple[float, ...], chosen: float) -> None:
    assert choose(_table(*f1), max_f1_loss=1.5) == chosen


def test_the_margin_is_chosen_on_held_out_training_articles_only() -> None:
    with pytest.raises(SystemExit):
        parse_args([])  # --holdout is required: the articles training left out
    assert parse_args(["--holdout", "0.1"]).holdout == 0.1
