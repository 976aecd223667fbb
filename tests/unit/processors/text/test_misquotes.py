"""misquotes: a claim that restates a sentence of its block with a name or a number changed, and
the claims that must not read as one (the sentence itself, a paraphrase, a claim that joins two
sentences, a fact the block states elsewhere, a change the question asked for)."""

from __future__ import annotations

import pytest
from answerbox.processors.text.misquotes import misquoted

from tests.support.super_bowl import BLOCK, PLAYED, QUESTION, TITLE


@pytest.mark.parametrize(
    ("claim", "sentence"),
    [
        (PLAYED.replace("Santa Clara, California", "Denver"), PLAYED),  # another name of the block
        (PLAYED.replace("Levi's Stadium", "the Carolina Panthers"), PLAYED),
        (PLAYED.replace("February 7", "February 9"), PLAYED),  # a number
        (TITLE.replace("third", "seventh"), TITLE),  # a number in words
    ],
)
def test_a_sentence_with_a_fact_changed_is_a_misquote_of_that_sentence(claim: str, sentence: str) -> None:
    found = misquoted(claim, BLOCK, QUESTION)
    assert found is not None
    assert BLOCK[found[0] : found[1]] == sentence


@pytest.mark.parametrize(
    "claim",
    [
        PLAYED,
        "Super Bowl 50 was played at Levi's Stadium in Santa Clara.",  # its own words
        "Super Bowl 50 was played in New Orleans.",  # a wrong fact, not a copied sentence: the verifier's
        "The game was played at Levi's Stadium, won by Denver.",  # two sentences joined
        PLAYED.rstrip(".") + ", and the Denver Broncos won.",
        "The Carolina Panthers defeated the Denver Broncos 24-10.",  # a swap of roles: the verifier's
        "It was an American football game.",
    ],
)
def test_a_claim_the_block_says_or_that_restates_no_sentence_is_no_misquote(claim: str) -> None:
    assert misquoted(claim, BLOCK, QUESTION) is None


def test_a_change_the_question_names_is_no_misquote_and_no_block_no_sentence_none() -> None:
    claim = PLAYED.replace("Santa Clara, California", "Super Bowl 50")
    assert misquoted(claim, BLOCK, QUESTION) is None
    assert misquoted(claim, BLOCK, "") is not None
    assert misquoted(PLAYED, "", QUESTION) is None
    assert misquoted("", BLOCK, QUESTION) is None


def test_a_fact_the_block_says_in_another_sentence_with_the_rest_is_no_misquote() -> None:
    block = BLOCK + " The game was played at Levi's Stadium in the Bay Area at Denver's request."
    claim = "The game was played at Levi's Stadium in the Bay Area at Denver."
    assert misquoted(claim, block, QUESTION) is None


COOK = (
    "Marie learned to cook at her grandmother's farm. She says the best way to learn is hands on "
    "practice. Most cookbooks, she adds, are written for people who already cook."
)
BEST_WAY = "She says the best way to learn is hands on practice."
ASKED = "What is the best way to learn to cook?"


def test_the_readers_answer_swapped_for_words_the_block_says_elsewhere_is_a_misquote_whatever_its_case() -> None:
    claim = "She says the best way to learn is her grandmother's farm."
    found = misquoted(claim, COOK, ASKED, "hands on practice")
    assert found is not None
    assert COOK[found[0] : found[1]] == BEST_WAY
    assert misquoted(claim, COOK, ASKED) is None  # no capital, no number: only the answer tells


@pytest.mark.parametrize(
    "claim",
    [
        BEST_WAY,
        "She says hands-on practice is the best way to learn.",  # its own order and spelling
        "She says the best way to learn is by doing.",  # its own words: the verifier's
        "She says the best way to learn is hands on practice at a farm.",  # the answer kept
    ],
)
def test_a_claim_that_keeps_the_readers_answer_or_says_it_in_its_own_words_is_no_misquote(claim: str) -> None:
    assert misquoted(claim, COOK, ASKED, "hands on practice") is None


def test_a_name_put_for_what_the_sentence_calls_it_is_no_misquote_of_the_answer() -> None:
    block = "Levi's Stadium opened in 2014. The stadium hosted Super Bowl 50 two years later."
    claim = "Levi's Stadium hosted Super Bowl 50 two years later."
    assert misquoted(claim, block, "Which stadium hosted Super Bowl 50?", "Levi's Stadium") is None


def test_a_copy_but_for_one_number_is_a_misquote_though_the_sentence_says_that_number_elsewhere() -> None:
    sentence = "Thomas led the team with 105 receptions, while Sanders added another 106 yards returning punts."
    block = f"{sentence} The Broncos won."
    assert misquoted(sentence.replace("105", "106"), block) == (0, len(sentence))
    assert misquoted(sentence, block) is None
