"""Keyword queries for CRAG's corrective search: parsing the LLM's rewrite, and a rewrite without an LLM.

The paper's prompt (Table 7) answers ``query: kw1, kw2, kw3``, keywords taken from the
question. A small model often answers the question instead, or repeats a name from the
prompt's examples; a keyword sharing no content word with the question is therefore
dropped. When the LLM is down or nothing usable is left, the fallback keeps the question's content words, grouped into the
phrases that stop words separate ("In what city was Billy Carlson born?" → "city",
"Billy Carlson born"), which is close to what the prompt asks the LLM for.
"""

from __future__ import annotations

import re

__all__ = ["MAX_KEYWORDS", "fallback_keywords", "parse_keywords"]

# "Extract at most three keywords" (paper Table 7).
MAX_KEYWORDS = 3

_TOKEN = re.compile(r"\w+(?:['’.-]\w+)*")
_PREFIX = re.compile(r"^\s*(?:query|keywords?)\s*:\s*", re.IGNORECASE)
_TRIM = " \t\"'`“”‘’.;:[]()"
_STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her
    here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not
    now of off on once only or other our ours ourselves out over own same she should so some such than that the
    their theirs them themselves then there these they this those through to too under until up very was we were
    what when where which while who whom whose why will with would you your yours yourself yourselves
    s name named called kind type many much one tell give list describe
    """.split()
)


def _content_words(text: str) -> set[str]:
    return {token.lower() for token in _TOKEN.findall(text)} - _STOP_WORDS


def parse_keywords(completion: str, question: str) -> list[str]:
    """The keywords of the first non-empty line of the LLM's answer that come from the question, at most ``MAX_KEYWORDS``."""
    line = next((line for line in completion.splitlines() if line.strip()), "")
    asked = _content_words(question)
    keywords = [part.strip(_TRIM) for part in _PREFIX.sub("", line).split(",")]
    return [k for k in dict.fromkeys(keywords) if _content_words(k) & asked][:MAX_KEYWORDS]


def fallback_keywords(question: str) -> list[str]:
    """The question's content-word phrases, in order; empty only when the question has none."""
    phrases: list[list[str]] = [[]]
    for token in _TOKEN.findall(question):
        if token.lower() in _STOP_WORDS:
            if phrases[-1]:
                phrases.append([])
        else:
            phrases[-1].append(token)
    return list(dict.fromkeys(" ".join(words) for words in phrases if words))
