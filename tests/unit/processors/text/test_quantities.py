"""quantities: a claim that restates (part of) a sentence with a number, a date, a share, a unit
or a direction changed is contradicted, quoting the sentence; a claim that keeps them, says them
in other words, or joins facts of two sentences is not."""

from __future__ import annotations

import time

import pytest
from answerbox.processors.text.quantities import misstated_quantity

from tests.support.super_bowl import BLOCK, PLAYED, TITLE

SALES = (
    "Sales rose 5% in 2019, to 2,400 units. The company has more than 300 employees. "
    "The plant opened before the war, in 1937. The track is 5 km long."
)


@pytest.mark.parametrize(
    ("claim", "block", "sentence"),
    [
        ("The game was played on February 9, 2016.", BLOCK, PLAYED),  # the issue's: a part restated
        ("The game was played on February 7, 2017.", BLOCK, PLAYED),  # a year
        ("The game was played in March 2016.", BLOCK, PLAYED),  # a month
        ("The Denver Broncos defeated the Carolina Panthers 31-10.", BLOCK, TITLE),  # a score
        ("The Broncos earned their seventh Super Bowl title.", BLOCK, TITLE),  # an ordinal in words
        ("The Denver Broncos lost to the Carolina Panthers 24-10.", BLOCK, TITLE),  # won/lost
        ("Sales fell 5% in 2019.", SALES, "Sales rose 5% in 2019, to 2,400 units."),  # rose/fell
        ("Sales rose 7 percent in 2019.", SALES, "Sales rose 5% in 2019, to 2,400 units."),  # a share
        ("The company has fewer than 300 employees.", SALES, "The company has more than 300 employees."),
        ("The plant opened after the war.", SALES, "The plant opened before the war, in 1937."),
        ("The track is 5 miles long.", SALES, "The track is 5 km long."),  # a unit
    ],
)
def test_a_quantity_changed_in_a_restated_sentence_is_found_in_that_sentence(
    claim: str, block: str, sentence: str
) -> None:
    found = misstated_quantity(claim, block)
    assert found is not None
    assert block[found[0] : found[1]] == sentence


@pytest.mark.parametrize(
    ("claim", "block"),
    [
        (PLAYED, BLOCK),
        ("The game was played on February 7, 2016.", BLOCK),  # a part, the number kept
        ("The game was played on Feb. 7, 2016.", BLOCK),
        ("Super Bowl 50 was played on 7 February 2016 in Santa Clara.", BLOCK),  # its own order
        ("The Broncos earned their 3rd Super Bowl title.", BLOCK),  # the number in other words
        ("The Broncos won their third Super Bowl title, beating the Panthers.", BLOCK),  # a paraphrase
        ("The Denver Broncos defeated the Carolina Panthers 24-10 on February 7, 2016.", BLOCK),  # two sentences
        ("Super Bowl 50 was an American football game played in 2016.", BLOCK),  # two sentences
        ("The Panthers lost to the Broncos 24-10.", BLOCK),  # roles swapped: the verifier's
        ("Sales rose 5 percent in 2019.", SALES),
        ("Sales rose to 2400 units in 2019.", SALES),
        ("The company has more than three hundred employees.", SALES),
        ("Sales rose in 2019 and the plant opened in 1937.", SALES),
        ("The track is five kilometres long.", SALES),
        ("Denver won.", BLOCK),  # restates nothing
        ("", BLOCK),
        (PLAYED, ""),
    ],
)
def test_a_claim_that_keeps_its_quantities_or_restates_no_one_sentence_is_not_flagged(claim: str, block: str) -> None:
    assert misstated_quantity(claim, block) is None


def test_a_sentence_of_megabytes_is_read_bounded() -> None:
    block = "The game was played on February 7, 2016 " + "and then some " * 300_000 + "."
    started = time.perf_counter()
    found = misstated_quantity("The game was played on February 9, 2016 " + "and then some " * 1_000, block)
    assert time.perf_counter() - started < 1.0
    assert found is not None  # the sentence as far as it was read
    assert block[found[0] : found[1]].startswith("The game was played on February 7, 2016 and then some")
