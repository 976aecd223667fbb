"""The Platt fit behind the evaluator's score: it must converge however large the logits are;
and the questions that choose the thresholds are the held-out training articles, never dev."""

from __future__ import annotations

import numpy as np
import pytest
from answerbox.models.confidence import platt

from onnx_models.calibrate import parse_args
from onnx_models.squad import DEV_FILE, TRAIN_FILES


@pytest.mark.parametrize("spread", [1.0, 8.0, 40.0])
def test_platt_recovers_the_slope_and_stays_finite_for_large_logits(spread: float) -> None:
    rng = np.random.default_rng(0)
    z = rng.normal(0.0, spread, 4000)
    # Labels drawn from a known logistic curve in z / spread: slope 1.5 / spread, offset -0.5.
    y = (rng.random(4000) < 1 / (1 + np.exp(-(1.5 * z / spread - 0.5)))).astype(np.float64)
    a, b = platt(z.tolist(), y.tolist())
    assert np.isfinite([a, b]).all()
    assert a * spread == pytest.approx(1.5, rel=0.15)
    assert b == pytest.approx(-0.5, abs=0.15)


def test_platt_on_separable_scores_is_steep_but_finite() -> None:
    z = np.array([-12.0, -9.0, -7.0, 7.0, 9.0, 12.0])
    y = np.array([0.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    a, b = platt(z.tolist(), y.tolist())
    assert np.isfinite([a, b]).all()
    assert a > 0


def test_the_thresholds_are_chosen_on_held_out_training_articles_and_dev_is_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = parse_args([])
    assert args.files == list(TRAIN_FILES)
    assert args.holdout == 0.1
    with pytest.raises(SystemExit):
        parse_args(["--files", DEV_FILE, *TRAIN_FILES])
    assert "the benches report on" in capsys.readouterr().err
