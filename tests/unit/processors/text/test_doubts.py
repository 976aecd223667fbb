"""doubts: a claim that shares its words with the block but exchanges two names across the
relation between them, appends words the block lacks to a copied sentence, or answers the
question otherwise than the reader, is doubted (unverified); a true restatement is not."""

from __future__ import annotations

import time

from answerbox.processors.text.doubts import doubted

from tests.support.super_bowl import BLOCK, PLAYED, QUESTION, TITLE

WON = (BLOCK.index(TITLE), BLOCK.index(TITLE) + len(TITLE))
AT = (BLOCK.index(PLAYED), BLOCK.index(PLAYED) + len(PLAYED))
WHO_WON = "Which NFL team won Super Bowl 50?"


def test_two_names_exchanged_across_the_verb_are_doubted() -> None:
    exchanged = "The Carolina Panthers defeated the Denver Broncos 24-10 to earn their third Super Bowl title."
    assert doubted(exchanged, BLOCK, QUESTION) == WON
    assert doubted("The Carolina Panthers defeated the Denver Broncos.", BLOCK, QUESTION) == WON


def test_a_restatement_that_moves_a_phrase_or_keeps_the_order_is_not() -> None:
    moved = "The game was played at Levi's Stadium in Santa Clara, California, on February 7, 2016."
    assert doubted(moved, BLOCK, QUESTION) is None
    assert doubted("The Denver Broncos defeated the Carolina Panthers.", BLOCK, QUESTION) is None
    assert doubted(TITLE, BLOCK, QUESTION) is None


def test_a_clause_the_block_does_not_hold_appended_to_a_copy_is_doubted() -> None:
    appended = f"{PLAYED.rstrip('.')}, and the halftime show was headlined by Coldplay."
    assert doubted(appended, BLOCK, QUESTION) == AT
    # What is added is said elsewhere in the block: left to the other checks.
    joined = f"{PLAYED.rstrip('.')}, and the Denver Broncos defeated the Carolina Panthers."
    assert doubted(joined, BLOCK, QUESTION) is None


def test_a_copy_with_one_stretch_replaced_is_doubted_a_shorter_paraphrase_is_not() -> None:
    assert doubted(PLAYED.replace("Levi's Stadium", "the Carolina stadium"), BLOCK, QUESTION) == AT
    # What is alike is not two thirds of each.
    assert doubted("Super Bowl 50 was played at Levi's Stadium.", BLOCK, QUESTION) is None
    # The question's words may stand for words that say nothing, not for the sentence's facts.
    he = "He was played on February 7, 2016, at Levi's Stadium in the San Francisco Bay Area."
    assert doubted(he.replace("He", "The game"), f"{he} It rained.", "When was the game played?") is None
    fact = PLAYED.replace("Levi's Stadium", "the Super Bowl")
    assert doubted(fact, BLOCK, "Where was the Super Bowl played?") == AT


def test_an_answer_to_the_question_the_reader_does_not_read_is_doubted() -> None:
    wrong = f'The answer to "{WHO_WON}" is Carolina Panthers.'
    assert doubted(wrong, BLOCK, WHO_WON, "Denver Broncos") == WON
    assert doubted(f'The answer to "{WHO_WON}" is Denver Broncos.', BLOCK, WHO_WON, "Denver Broncos") is None
    # A sentence that does not restate the question, or a block where the reader found nothing.
    assert doubted("Super Bowl 50 was played at Levi's Stadium.", BLOCK, WHO_WON, "Denver Broncos") is None
    assert doubted(wrong, BLOCK, WHO_WON, "") is None


def test_a_block_of_megabytes_is_read_in_bounded_time() -> None:
    fragment = "Levi's Stadium hosted the Denver game on February 7 " * 80_000  # 4 MB, one sentence
    claim = "Denver hosted the Levi's Stadium game on February 7 " * 40
    started = time.perf_counter()
    doubted(claim, fragment, QUESTION, "Levi's Stadium")
    assert time.perf_counter() - started < 1.0
