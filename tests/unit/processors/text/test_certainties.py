"""certainties: the rules in order, copy first; what they leave open is None, and no input
size holds them long."""

from __future__ import annotations

import time

from answerbox.processors.text.certainties import Certainty, certainty

from tests.support.super_bowl import BLOCK, PLAYED, QUESTION

AT = (BLOCK.index(PLAYED), BLOCK.index(PLAYED) + len(PLAYED))


def test_a_copy_is_entailed_a_misquote_or_a_misstated_quantity_contradicted() -> None:
    assert certainty(PLAYED, BLOCK, QUESTION) == Certainty("entailed", AT, "copy")
    misquote = PLAYED.replace("Santa Clara, California", "Denver")
    assert certainty(misquote, BLOCK, QUESTION) == Certainty("contradicted", AT, "misquote")
    part = "The game was played on February 9, 2016."
    assert certainty(part, BLOCK, QUESTION) == Certainty("contradicted", AT, "quantity")


def test_a_paraphrase_or_a_claim_joining_two_sentences_is_left_open() -> None:
    assert certainty("Super Bowl 50 took place at Levi's Stadium in Santa Clara.", BLOCK, QUESTION) is None
    assert certainty("The Broncos beat the Panthers 24-10 on February 7, 2016.", BLOCK, QUESTION) is None


def test_a_block_of_megabytes_with_no_stop_is_read_in_bounded_time() -> None:
    fragment = "Levi's Stadium hosted the Denver game on February 7 " * 80_000  # 4 MB, one sentence
    claim = "Levi's Stadium hosted the Denver game on February 9 " * 40
    started = time.perf_counter()
    certainty(claim, fragment, QUESTION, "Levi's Stadium")
    assert time.perf_counter() - started < 1.0
