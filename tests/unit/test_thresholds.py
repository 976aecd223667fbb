"""Choosing ``min_confidence`` from labelled questions: the bound, what counts as an answer, the file."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from answerbox.core.errors import ConfigError
from answerbox.models.confidence import Recalibration
from answerbox.ops.thresholds import (
    Labelled,
    Outcome,
    ece,
    fit_recalibration,
    lowest_threshold,
    outcome_of,
    read_labelled,
    report,
)

# Ten answers, most confident first: the first six right, then wrong, right, wrong, wrong.
CONFIDENCE = [0.95, 0.9, 0.85, 0.8, 0.75, 0.7, 0.6, 0.5, 0.4, 0.3]
RIGHT = [True] * 6 + [False, True, False, False]


def test_the_point_estimate_takes_the_lowest_threshold_that_meets_the_target() -> None:
    # At 0.5: 7 of 8 right (87.5%); at 0.4: 7 of 9 (77.8%).
    assert lowest_threshold(CONFIDENCE, RIGHT, 0.85, z=0, min_answered=1) == 0.5


def test_the_wilson_bound_asks_for_more_than_the_sample_shows() -> None:
    # 6 of 6 right has a one-sided 95% lower bound of 0.69; 7 of 8 is lower still.
    assert lowest_threshold(CONFIDENCE, RIGHT, 0.85, z=1.645, min_answered=1) == 1.0
    assert lowest_threshold(CONFIDENCE, RIGHT, 0.65, z=1.645, min_answered=1) == 0.7


def test_a_threshold_answers_every_tie_at_it() -> None:
    # Ties sorted right answers first would make 0.8 pass after four answers (4 of 4 right);
    # a threshold of 0.8 answers all six, 4 of 6 right (66.7%), so 85% stays at 0.9.
    confidence = [0.9, 0.8, 0.8, 0.8, 0.8, 0.8]
    right = [True, True, False, True, False, True]
    assert lowest_threshold(confidence, right, 0.85, z=0, min_answered=1) == 0.9
    assert lowest_threshold(confidence, right, 0.6, z=0, min_answered=1) == 0.8


def test_a_threshold_must_keep_enough_answers() -> None:
    assert lowest_threshold(CONFIDENCE, RIGHT, 0.85, z=0, min_answered=9) == 1.0


def test_the_answer_or_the_candidate_held_back_is_what_the_pipeline_said() -> None:
    item = Labelled("Who wrote Dune?", ("Frank Herbert",))

    def said(answer: dict[str, object]) -> Outcome:
        return outcome_of({"ext": {"answerbox": {"answer": answer}}}, item)

    assert said({"text": "Frank Herbert", "confidence": 0.9, "abstained": False}) == Outcome(0.9, True)
    held_back = {"text": "I cannot say.", "abstained": True, "candidate": {"text": "Herbert", "confidence": 0.2}}
    assert said(held_back) == Outcome(0.2, False)  # "Herbert" does not hold "Frank Herbert"
    assert said({"text": "I cannot say.", "abstained": True, "reason": "retrieval_incorrect"}) == Outcome(None, False)
    assert outcome_of({"hits": {"hits": []}}, item) == Outcome(None, False)  # not an answerbox pipeline


def test_a_question_without_an_answer_counts_against_coverage_never_as_answered() -> None:
    outcomes = [Outcome(0.9, True)] * 3 + [Outcome(None, False)]
    chosen, shown = report(outcomes, precision=0.85, z=0, min_answered=1)
    assert chosen == 0.9
    assert "4 questions: 3 with an answer or a candidate, 3 of them right" in shown
    assert "answers 75.0%, 100.0% of them right" in shown
    assert '{"cited_answer": {"min_confidence": 0.9}}' in shown  # all right: nothing to correct


def test_the_report_shows_the_mean_confidence_beside_the_share_right() -> None:
    outcomes = [Outcome(0.9, True), Outcome(0.8, False), Outcome(0.7, True), Outcome(0.6, False), Outcome(None, False)]
    _, shown = report(outcomes, precision=0.85, z=0, min_answered=1)
    rows = {line.split()[0]: line.split()[1:] for line in shown.splitlines() if line.startswith("  0.")}
    assert rows["0.90"] == ["20.0%", "100.0%", "90.0%"]
    assert rows["0.80"] == ["40.0%", "50.0%", "85.0%"]  # said 85%, right 50%: too confident here
    assert rows["0.60"] == ["80.0%", "50.0%", "75.0%"]
    assert rows["0.50"] == rows["0.60"]


def test_no_threshold_says_so() -> None:
    chosen, shown = report([Outcome(0.9, False)] * 5, precision=0.85, z=0, min_answered=1)
    assert chosen is None
    assert "no threshold reaches 85% precision" in shown


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("not json", "2: not JSON"),
        ('{"question": "", "answers": ["x"]}', "2: needs a non-empty string 'question'"),
        ('{"question": "Who?", "answers": []}', "2: needs 'answers', a list of non-empty strings"),
        ('["Who?", ["x"]]', "2: needs a non-empty string 'question'"),
    ],
)
def test_a_bad_line_is_refused_by_its_number(tmp_path: Path, line: str, reason: str) -> None:
    path = tmp_path / "questions.jsonl"
    path.write_text('{"question": "Who wrote Dune?", "answers": ["Frank Herbert"]}\n' + line + "\n")
    with pytest.raises(ConfigError, match=reason):
        read_labelled(path)


def test_a_file_of_questions_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "questions.jsonl"
    path.write_text('{"question": "Who wrote Dune?", "answers": ["Frank Herbert", "Herbert"]}\n\n')
    assert read_labelled(path) == [Labelled("Who wrote Dune?", ("Frank Herbert", "Herbert"))]
    path.write_text("\n")
    with pytest.raises(ConfigError, match="holds no question"):
        read_labelled(path)


def test_the_calibration_error_weighs_each_bin_by_its_answers() -> None:
    # Bin 0.9: said 0.9 twice, right once (gap 0.8 over 2); bin 0.2: said 0.2, wrong (gap 0.2).
    assert ece([0.9, 0.9, 0.2], [True, False, False]) == pytest.approx((0.8 + 0.2) / 3)
    assert ece([0.5, 0.5], [True, False]) == 0.0


def test_the_correction_finds_how_far_the_confidence_is_off() -> None:
    truth = Recalibration(scale=0.5, offset=-0.4)
    rng = random.Random(3)
    said = [rng.uniform(0.02, 0.98) for _ in range(4000)]
    right = [rng.random() < truth(c) for c in said]
    found = fit_recalibration(said, right)
    assert found.scale == pytest.approx(0.5, abs=0.08)
    assert found.offset == pytest.approx(-0.4, abs=0.12)
    assert ece([found(c) for c in said], right) < ece(said, right) / 2


def _setting(shown: str) -> dict[str, Any]:
    line = next(line for line in shown.splitlines() if line.startswith("set it in the pipeline: "))
    setting: dict[str, Any] = json.loads(line.removeprefix("set it in the pipeline: "))["cited_answer"]
    return setting


def test_the_report_gives_the_correction_and_the_threshold_on_its_scale() -> None:
    rng = random.Random(5)
    said = [round(rng.uniform(0.3, 0.99), 4) for _ in range(400)]
    # Right far less often than said: the correction lowers the numbers.
    outcomes = [Outcome(c, rng.random() < c - 0.25) for c in said]
    chosen, shown = report(outcomes, precision=0.6, z=0, min_answered=20)
    assert chosen is not None
    setting = _setting(shown)
    correction = Recalibration.model_validate(setting["calibration"])
    assert correction(0.9) < 0.8
    assert setting["min_confidence"] == pytest.approx(correction(chosen), abs=1e-4)
    assert setting["min_confidence"] <= correction(chosen)  # the answer at the threshold still shows
    assert "this index's correction of the confidence" in shown
    # On a pipeline that has a correction already, the new one goes on top of it.
    current = Recalibration(scale=2.0, offset=0.5)
    _, again = report(outcomes, precision=0.6, z=0, min_answered=20, current=current)
    assert Recalibration.model_validate(_setting(again)["calibration"]) == current.then(correction)
