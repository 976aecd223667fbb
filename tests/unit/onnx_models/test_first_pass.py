"""How retrieval_evaluator's first-pass stop is chosen: the lowest that answers about as often as one pass."""

from __future__ import annotations

import pytest
from answerbox.processors.retrieval_evaluator.processor import RetrievalEvaluatorConfig
from pydantic import ValidationError

from onnx_models.calibrate.first_pass import choose, first_pass_pipeline


def _runs(one_pass: float, low: float, high: float) -> dict[float | None, dict[str, float]]:
    """Coverage at 85% of one pass and of the stops 0.517 and 0.6."""
    return {None: {"coverage": one_pass}, 0.517: {"coverage": low}, 0.6: {"coverage": high}}


@pytest.mark.parametrize(
    ("runs", "chosen"),
    [
        (_runs(0.712, 0.697, 0.712), 0.6),  # the lower stop loses 1.5 points
        (_runs(0.712, 0.709, 0.712), 0.517),  # both within half a point: the lower reads less
        (_runs(0.712, 0.690, 0.700), None),  # none: every hit in one pass
    ],
)
def test_the_lowest_stop_within_the_tolerance_of_one_pass_wins(
    runs: dict[float | None, dict[str, float]], chosen: float | None
) -> None:
    assert choose(runs, tolerance=0.005) == chosen


def test_one_pass_and_a_stop_differ_only_in_the_evaluators_passes() -> None:
    one, two = first_pass_pipeline(None), first_pass_pipeline(0.6)
    assert one["response_processors"][0]["retrieval_evaluator"]["first_pass"] is None
    assert two["response_processors"][0]["retrieval_evaluator"] | {"first_pass": None, "first_pass_stop": None} == (
        one["response_processors"][0]["retrieval_evaluator"] | {"first_pass_stop": None}
    )
    assert one["response_processors"][1:] == two["response_processors"][1:]


def test_the_evaluators_settings_go_into_every_run_and_are_checked_as_a_pipeline_is() -> None:
    both = {"ambiguous": "refine+corrective_search"}
    for stop in (None, 0.6):
        config = first_pass_pipeline(stop, evaluator=both)["response_processors"][0]["retrieval_evaluator"]
        assert config == first_pass_pipeline(stop)["response_processors"][0]["retrieval_evaluator"] | both
        RetrievalEvaluatorConfig.model_validate(config)
    with pytest.raises(ValidationError):
        RetrievalEvaluatorConfig.model_validate(
            first_pass_pipeline(0.6, evaluator={"ambiguous": "web"})["response_processors"][0]["retrieval_evaluator"]
        )
