"""verifier_pairs: the contrastive kinds of issue 88 (a month changed, a direction flipped, two names
exchanged, a neighbour's sentence appended), each made with no draw from the shared ``rng``, so the
older kinds' pairs stay what they were for a seed."""

from __future__ import annotations

import random

import pytest
from answerbox.processors.text.quantities import _POLAR  # the rule's direction words, to hold ours to

from onnx_models.data.squad import Paragraph, Question
from onnx_models.data.verifier_pairs import (
    _FLIPS,
    CONTRADICTED,
    NEUTRAL,
    _comparative_flipped,
    _date_changed,
    _roles_exchanged,
    articles_pairs,
)

GAME = (
    "Super Bowl 50 was an American football game. The game was played on February 7, 2016, at Levi's Stadium "
    "in Santa Clara, California. The Denver Broncos defeated the Carolina Panthers 24-10 to win their third "
    "Super Bowl title."
)
SEASON = "However, the Panthers had the better regular season. Cam Newton was named the league's MVP."
WON = "The Denver Broncos defeated the Carolina Panthers 24-10 to win their third Super Bowl title."
PLAYED = "The game was played on February 7, 2016, at Levi's Stadium in Santa Clara, California."
NEW_KINDS = ("date_changed", "comparative_flipped", "roles_exchanged", "clause_appended")


def _question(n: int, text: str, answer: str, context: str) -> Question:
    return Question(f"q/{n}", text, (answer,), (context.index(answer),))


PARAGRAPHS = [
    Paragraph(
        "p/0/0",
        "Super Bowl 50",
        GAME,
        (
            _question(0, "Which team won Super Bowl 50?", "Denver Broncos", GAME),
            _question(1, "When was the game played?", "February 7, 2016", GAME),
        ),
    ),
    Paragraph("p/0/1", "Super Bowl 50", SEASON, (_question(2, "Who was named MVP?", "Cam Newton", SEASON),)),
]


def _made(kind: str) -> dict[str, tuple[str, int]]:
    """Each question's claim of ``kind`` and its label, seed 13."""
    pairs = (pair for _, pair in articles_pairs(PARAGRAPHS, random.Random(13)))
    return {pair.question: (pair.claim, pair.label) for pair in pairs if pair.kind == kind}


def test_a_month_is_changed_to_the_next() -> None:
    assert _made("date_changed") == {
        "When was the game played?": (
            "The game was played on March 7, 2016, at Levi's Stadium in Santa Clara, California.",
            CONTRADICTED,
        )
    }
    assert _date_changed("It opened on 31 December 1999.") == "It opened on 31 January 1999."
    assert _date_changed("They may meet in May 2016.") == "They may meet in June 2016."
    assert _date_changed("May Day is kept in Warsaw.") is None  # "May" beside no number: no date


def test_a_direction_word_is_flipped_to_its_opposite() -> None:
    assert _made("comparative_flipped") == {
        "Which team won Super Bowl 50?": (
            "The Denver Broncos defeated the Carolina Panthers 24-10 to lose their third Super Bowl title.",
            CONTRADICTED,
        )
    }
    assert _comparative_flipped("Prices rose more than 5%.") == "Prices fell more than 5%."
    assert _comparative_flipped("Earlier, most of the team lost.") == "Later, most of the team lost."
    assert _comparative_flipped("First Avenue has most of the shops.") is None  # a name's word; "most of"


def test_each_flip_is_the_opposite_on_the_quantity_rule_s_own_axis() -> None:
    for word, opposite in _FLIPS.items():
        (axis, sign), (other_axis, other_sign) = _POLAR[word], _POLAR[opposite]
        assert (axis, sign != other_sign) == (other_axis, True), (word, opposite)


def test_two_names_of_the_sentence_are_exchanged() -> None:
    assert _made("roles_exchanged") == {
        "Which team won Super Bowl 50?": (
            "The Carolina Panthers defeated the Denver Broncos 24-10 to win their third Super Bowl title.",
            CONTRADICTED,
        ),
        # The answer is a date, no name: the sentence's first two names.
        "When was the game played?": (
            "The game was played on February 7, 2016, at Santa Clara in Levi's Stadium, California.",
            CONTRADICTED,
        ),
        "Who was named MVP?": ("MVP was named the league's Cam Newton.", CONTRADICTED),
    }


def test_a_name_keeps_its_number_and_a_date_is_no_name() -> None:
    assert (
        _roles_exchanged("CBS broadcast Super Bowl 50 in the U.S. on February 7.", "CBS", 0)
        == "Super Bowl 50 broadcast CBS in the U.S. on February 7."
    )


@pytest.mark.parametrize(
    "sentence",
    [
        "Paris and London are capitals.",  # listed together: exchanged, they say the same
        "Paris, France is a capital.",
        "However, the city grew.",  # a capitalised first word is no name
    ],
)
def test_names_listed_together_or_no_names_are_not_exchanged(sentence: str) -> None:
    assert _roles_exchanged(sentence, "", 0) is None


def test_a_neighbour_s_sentence_is_appended_as_a_clause() -> None:
    assert _made("clause_appended") == {
        # "However," goes, "the" is lowercased
        "Which team won Super Bowl 50?": (
            f"{WON[:-1]}, and the Panthers had the better regular season.",
            NEUTRAL,
        ),
        # a name keeps its capital
        "When was the game played?": (f"{PLAYED[:-1]}, and Cam Newton was named the league's MVP.", NEUTRAL),
        "Who was named MVP?": (
            "Cam Newton was named the league's MVP, and Super Bowl 50 was an American football game.",
            NEUTRAL,
        ),
    }


def test_the_older_kinds_stay_as_they_were_for_a_seed() -> None:
    made = [(pair.kind, pair.claim) for _, pair in articles_pairs(PARAGRAPHS, random.Random(13))]
    assert [m for m in made if m[0] not in NEW_KINDS] == [
        ("sentence", WON),
        ("question", 'The answer to "Which team won Super Bowl 50?" is Denver Broncos.'),
        ("swapped", "The February 7, 2016 defeated the Carolina Panthers 24-10 to win their third Super Bowl title."),
        ("question_wrong", 'The answer to "Which team won Super Bowl 50?" is February 7, 2016.'),
        ("number_changed", WON.replace("24-10", "25-10")),
        ("other_paragraph", "However, the Panthers had the better regular season."),
        ("sentence", PLAYED),
        ("question", 'The answer to "When was the game played?" is February 7, 2016.'),
        ("swapped", "The game was played on Denver Broncos, at Levi's Stadium in Santa Clara, California."),
        ("question_wrong", 'The answer to "When was the game played?" is Denver Broncos.'),
        ("number_changed", PLAYED.replace("February 7", "February 8")),
        ("other_paragraph", "However, the Panthers had the better regular season."),
        ("sentence", "Cam Newton was named the league's MVP."),
        ("question", 'The answer to "Who was named MVP?" is Cam Newton.'),
        ("other_paragraph", "Super Bowl 50 was an American football game."),
    ]
    # and the shared generator is where the older kinds alone leave it
    rng, older = random.Random(13), random.Random(13)
    list(articles_pairs(PARAGRAPHS, rng))
    for _ in range(2):  # the game's questions: a wrong answer, the season paragraph, one of its 2 sentences
        older.choice([0]), older.choice([0]), older.choice([0, 1])
    older.choice([0]), older.choice([0, 1, 2])  # the MVP's (no wrong answer): the game paragraph, 1 of 3
    assert rng.getstate() == older.getstate()
