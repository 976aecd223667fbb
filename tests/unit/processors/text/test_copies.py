"""copies: a claim that copies a sentence of its block is entailed with no model; a sentence with
any fact, negation, direction or pronoun changed is no copy."""

from __future__ import annotations

import pytest
from answerbox.processors.text.bounded import MAX_SENTENCE_CHARS
from answerbox.processors.text.copies import copied

from tests.support.super_bowl import BLOCK, PLAYED


@pytest.mark.parametrize(
    "claim",
    [
        PLAYED,
        PLAYED.upper(),  # case
        PLAYED.replace(",", "").rstrip("."),  # punctuation
        "The game was played on February 7, 2016, at Levi's Stadium in San Francisco Bay Area at Santa Clara, "
        "California.",  # an article dropped
    ],
)
def test_a_copy_of_a_sentence_is_found_where_that_sentence_is(claim: str) -> None:
    found = copied(claim, BLOCK)
    assert found is not None
    assert BLOCK[found[0] : found[1]] == PLAYED


@pytest.mark.parametrize(
    "claim",
    [
        PLAYED.replace("February 7", "February 9"),  # a number
        PLAYED.replace("was played", "was not played"),  # a negation
        PLAYED.replace("Santa Clara, California", "Denver"),  # a name
        "The game was played on February 7, 2016.",  # a part: not the whole sentence
        "The Denver Broncos lost to the Carolina Panthers 24-10 to earn their third Super Bowl title.",
        # every word kept, two names exchanged: the words out of order say the opposite
        "The Carolina Panthers defeated the Denver Broncos 24-10 to earn their third Super Bowl title.",
        PLAYED.replace("on February", "before February"),  # a direction word for a preposition
        "Yes.",
        "The game was played on February 7, 2016, from Levi's Stadium in the San Francisco Bay Area to "
        "Santa Clara, California.",  # prepositions: "from" and "to" say where
    ],
)
def test_a_sentence_changed_or_cut_is_no_copy(claim: str) -> None:
    assert copied(claim, BLOCK) is None


def test_a_sentence_too_long_to_read_whole_is_never_copied() -> None:
    long = "The game was " + "very " * (MAX_SENTENCE_CHARS // 5) + "long."
    assert copied(long, long) is None
    assert copied("", BLOCK) is None
    assert copied(PLAYED, "") is None
