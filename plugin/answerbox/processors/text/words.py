"""Word-level text shared by the processors: function words, content terms, and the "final answer" sentence."""

from __future__ import annotations

import re

__all__ = ["CLAIM_STOPWORDS", "FINAL_ANSWER", "FUNCTION_WORDS", "QUESTION_WORDS", "terms", "tokens"]

# English function words: they carry no claim and make no keyword. Each user adds words of
# its own domain (a question's "name" or "kind", an answer's "according").
FUNCTION_WORDS = frozenset(
    """
    a about above after again against all also am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have having
    he her here hers herself him himself his how i if in into is it its itself just may me might more most my
    myself no nor not now of off on once one only or other our ours ourselves out over own same she should so
    some such than that the their theirs them themselves then there these they this those through to too under
    until up very was we were what when where which while who whom whose why will with would yes you your yours
    yourself yourselves
    """.split()
)

# A question's own framing words say what it asks for, not what about.
QUESTION_WORDS = FUNCTION_WORDS | frozenset("s name named called kind type many much tell give list describe".split())
# What a claim says besides its facts: "according to [1]", "the answer to ... is".
CLAIM_STOPWORDS = FUNCTION_WORDS | frozenset("according answer question today".split())

_TOKEN = re.compile(r"\w+(?:['’.-]\w+)*")


def tokens(text: str) -> list[str]:
    """The words of ``text``, in order (``don't``, ``U.S.`` and ``e-mail`` are one each)."""
    return _TOKEN.findall(text)


def terms(text: str, stop_words: frozenset[str] = FUNCTION_WORDS) -> set[str]:
    """The lowercased words of ``text`` that are not ``stop_words``."""
    return {token.lower() for token in tokens(text)} - stop_words


# Chain-of-thought and chain answers end with "So the final answer is X." / "Final answer: X";
# ``answer`` is X, up to the end of its line.
FINAL_ANSWER = re.compile(
    r"(?:\bso\s+)?(?:\bthe\s+)?\bfinal\s+answer(?:\s+is\b|\s*:)\s*:?\s*(?P<answer>[^\n]*)", re.IGNORECASE
)
