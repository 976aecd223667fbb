"""The answer-confidence calibrator as the manifest holds it: parsed strictly, applied as fitted."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from answerbox.core.errors import ModelError
from answerbox.models.confidence import AnswerCalibrator, GenerativeSignals, Recalibration, SnippetSignals
from answerbox.models.manifest import ModelManifest

SNIPPET = SnippetSignals(
    score=0.6,
    margin=0.3,
    span_probability=0.5,
    over_no_answer=2.0,
    question_overlap=0.5,
    rank=0,
    words=2,
    agreement=0.25,
    covered_probability=0.7,
)


def _model(names: dict[str, float], intercept: float = -1.0) -> dict[str, Any]:
    return {"coefficients": names, "intercept": intercept}


def _fitted(**overrides: Any) -> dict[str, Any]:
    extractive = _model({name: 0.5 for name in SNIPPET.features()})
    generative = _model({"support": 1.0, "snippet_confidence": 2.0, "agrees": 1.0})
    return {
        "extractive": extractive,
        "generative": generative,
        "min_confidence": 0.6,
        "skip_llm_above": 0.8,
    } | overrides


def test_the_confidence_is_the_fitted_logistic_regression() -> None:
    calibrator = AnswerCalibrator.from_manifest(_fitted())
    z = -1.0 + 0.5 * sum(SNIPPET.features().values())
    assert calibrator.confidence(SNIPPET) == round(1 / (1 + math.exp(-z)), 4)
    assert (calibrator.min_confidence, calibrator.skip_llm_above) == (0.6, 0.8)
    agrees, differs = GenerativeSignals(0.5, 0.7, True), GenerativeSignals(0.5, 0.7, False)
    assert calibrator.confidence(agrees) > calibrator.confidence(differs)


def test_the_reader_is_sure_of_its_span_and_of_an_answer_at_once() -> None:
    features = SNIPPET.features()
    assert features["span_probability_x_over_no_answer"] == 0.5 * 2.0
    unsure = replace(SNIPPET, span_probability=0.1).features()
    assert unsure["span_probability_x_over_no_answer"] == 0.1 * 2.0


def test_without_a_fit_the_confidence_is_the_evaluators_probability() -> None:
    calibrator = AnswerCalibrator.from_manifest({})
    assert calibrator.confidence(SNIPPET) == 0.8  # (score + 1) / 2
    assert calibrator.confidence(GenerativeSignals(0.0, 0.9, True)) == 0.9
    assert calibrator.confidence(GenerativeSignals(0.0, 0.9, False)) == 0.5
    assert calibrator.skip_llm_above == 1.0  # with no fit, the LLM is always asked


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"extractive": _model({"score": 1.0})}, "this version computes"),
        ({"generative": {"coefficients": {}}}, "'intercept'"),
        ({"min_confidence": 1.5}, "min_confidence must be a number in [0, 1]"),
        ({"skip_llm_above": True}, "skip_llm_above must be a number in [0, 1]"),
        ({"extractive": _model({name: math.inf for name in SNIPPET.features()})}, "finite"),
    ],
)
def test_a_calibrator_this_version_cannot_apply_is_refused(change: dict[str, Any], says: str) -> None:
    with pytest.raises(ModelError, match=re.escape(says)):
        AnswerCalibrator.from_manifest(_fitted(**change))


def test_a_manifest_with_a_bad_calibrator_does_not_load(tmp_path: Path) -> None:
    ModelManifest(task="reader-evaluator", variants={"int8": "model.int8.onnx"}, answer_confidence=_fitted()).save(
        tmp_path
    )
    assert ModelManifest.load(tmp_path).answer_calibrator.min_confidence == 0.6
    ModelManifest(task="reader-evaluator", variants={"int8": "model.int8.onnx"}).replace().save(tmp_path)
    text = (
        (tmp_path / "manifest.json")
        .read_text()
        .replace('"answer_confidence": {}', '"answer_confidence": {"min_confidence": 2}')
    )
    (tmp_path / "manifest.json").write_text(text)
    with pytest.raises(ModelError, match="min_confidence"):
        ModelManifest.load(tmp_path)


def test_an_index_correction_is_a_platt_map_that_keeps_the_order() -> None:
    correction = Recalibration(scale=0.5, offset=0.4)
    said = [0.05, 0.3, 0.5, 0.7, 0.95]
    corrected = [correction(p) for p in said]
    assert corrected == sorted(corrected)
    assert corrected[2] == pytest.approx(1 / (1 + math.exp(-0.4)))  # logit(0.5) = 0
    assert [correction.undo(p) for p in corrected] == pytest.approx(said)
    assert (correction(0.0), correction(1.0)) == (0.0, 1.0)  # "always" and "never" stay thresholds
    twice = correction.then(Recalibration(scale=2.0, offset=-0.1))
    assert twice(0.3) == pytest.approx(Recalibration(scale=2.0, offset=-0.1)(correction(0.3)))
    with pytest.raises(ValueError, match="greater than 0"):
        Recalibration(scale=0)  # a turned-around order would say nothing


def test_a_corrected_calibrator_moves_its_thresholds_and_keeps_the_shipped_probability() -> None:
    shipped = AnswerCalibrator.from_manifest(_fitted())
    correction = Recalibration(scale=0.5, offset=-0.3)
    corrected = shipped.for_index(correction)
    assert corrected.probability(SNIPPET) == shipped.probability(SNIPPET)
    assert corrected.confidence(SNIPPET) == round(correction(shipped.probability(SNIPPET)), 4)
    assert (corrected.min_confidence, corrected.skip_llm_above) == (
        round(correction(0.6), 4),
        round(correction(0.8), 4),
    )
    assert shipped.for_index(None) is shipped
    # A second correction goes on top of the first.
    again = corrected.for_index(correction)
    assert again.confidence(SNIPPET) == pytest.approx(correction(correction(shipped.probability(SNIPPET))), abs=1e-4)
