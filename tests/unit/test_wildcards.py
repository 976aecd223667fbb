"""OpenSearch's simple wildcards, matched in linear time: what they match, and that a caller's
pattern of many ``*`` against a key it cannot match costs no more than a plain one."""

from __future__ import annotations

import time

import pytest
from answerbox.core.wildcards import simple_match, wildcards


@pytest.mark.parametrize(
    ("pattern", "text", "matches"),
    [
        ("hits", "hits", True),
        ("hits", "hit", False),
        ("*", "", True),
        ("*", "anything", True),
        ("h*s", "hits", True),
        ("h*s", "hs", True),
        ("h*s", "h", False),  # the two ends may not overlap
        ("*_id", "_id", True),
        ("*_id", "_ids", False),
        ("a*b*c", "aXbYc", True),
        ("a*b*c", "acb", False),
        ("a*bc*bc", "abcbc", True),
        ("a*bc*bc", "abcXbc", True),
        ("logs-*-2024", "logs-app-2024", True),
        ("logs-*-2024", "logs-2024", False),
        ("***a", "ba", True),
        ("a?", "ab", False),  # ``?`` and ``[`` are characters, as in OpenSearch
        ("a?", "a?", True),
        ("[ab]", "a", False),
    ],
)
def test_a_star_takes_any_run_and_every_other_character_itself(pattern: str, text: str, matches: bool) -> None:
    assert simple_match(pattern, text) is matches


@pytest.mark.parametrize(("pattern", "count"), [("hits", 0), ("*", 1), ("***", 1), ("a*b*c", 2), ("*a**b*", 3)])
def test_a_run_of_stars_counts_as_one(pattern: str, count: int) -> None:
    assert wildcards(pattern) == count


def test_many_stars_against_a_key_they_cannot_match_cost_what_one_does() -> None:
    """``re`` took seconds over 28 of them (``.*`` each, backtracking); here each is a ``find``."""
    key = "a" * 200
    started = time.perf_counter()
    for _ in range(100):
        assert not simple_match("*a" * 200 + "Z", key)
    assert time.perf_counter() - started < 1.0
