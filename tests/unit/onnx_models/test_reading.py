"""What the reader's benches count in what it said: one question at a time, against its golds."""

from __future__ import annotations

from onnx_models.evaluate.reading import measure

GOLDS = ["Denver Broncos"]


def test_each_share_counts_what_its_name_says() -> None:
    said = [
        ("the Denver Broncos", GOLDS),  # right, not exact
        ("Denver", GOLDS),  # cut short
        ("Denver Broncos. The Carolina Panthers", GOLDS),  # right, across a sentence end
        ("", GOLDS),  # no answer
    ]
    row = measure(said)
    assert row["questions"] == 4
    assert row["em"] == 25.0  # "the" is dropped by SQuAD normalisation
    assert row["contains_gold"] == 50.0
    assert row["cut_short"] == 25.0
    assert row["across_sentences"] == 25.0
    assert row["no_answer_share"] == 0.25


def test_an_abbreviation_inside_an_answer_is_not_a_sentence_end() -> None:
    assert measure([("the U.S. Army", ["U.S. Army"])])["across_sentences"] == 0.0
