"""The Platt fit behind the evaluator's score: it must converge however large the logits are;
the questions that choose the thresholds are the held-out training articles, never dev; and a
rerun rewrites only its own part of the manifest."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from answerbox.core.config import ModelSettings
from answerbox.models import ModelManifest
from answerbox.models.confidence import platt

from onnx_models.calibrate.thresholds import calibrate, parse_args
from onnx_models.data.squad import DEV_FILE, TRAIN_FILES


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


def test_a_rerun_keeps_the_later_steps_records_and_what_they_chose(tmp_path: Path) -> None:
    shutil.copy(ModelSettings().dir / "manifest.json", tmp_path / "manifest.json")
    before = ModelManifest.load(tmp_path)
    rng = np.random.default_rng(0)
    # Four pairs a question, the first relevant; the reader right on half the relevant ones.
    pairs = [
        (q, float(rng.normal(6.0 if i == 0 else -2.0, 2.0)), i == 0, i == 0 and q % 2 == 0)
        for q in range(200)
        for i in range(4)
    ]
    (tmp_path / "pairs.json").write_text(json.dumps(pairs))
    calibrate(parse_args(["--model-dir", str(tmp_path), "--pairs-in", str(tmp_path / "pairs.json")]))
    after = ModelManifest.load(tmp_path)
    for later in ("rerank_fusion", "span_cover", "answer_confidence"):
        assert after.calibration[later] == before.calibration[later]
    assert after.answer_confidence == before.answer_confidence
    assert after.span_cover_margin == before.span_cover_margin
    assert after.calibration["pairs"] == 800
    assert after.calibration["reader_span_correct_given_relevant"] == 0.5
