"""Keyword queries for CRAG's corrective search: parsing the LLM's rewrite, and a rewrite without an LLM.

The paper's prompt (Table 7) answers ``query: kw1, kw2, kw3``, keywords taken from the
question. A small model often answers the question instead, or repeats a name from the
prompt's examples; a keyword sharing no content word with the question is therefore
dropped. When the LLM is down or nothing usable is left, the fallback keeps the question's
content words, grouped into the phrases that stop words separate ("In what city was Billy Carlson born?" → "city",
"Billy Carlson born"), which is close to what the prompt asks the LLM for.

Where the LLM endpoint takes a schema, the keywords are asked for as :data:`KEYWORDS_SCHEMA`'s
JSON; :func:`read_keywords` reads either form and keeps the same keywords.
"""

from __future__ import annotations

import re

from pydantic import BaseModel

from answerbox.llm.structured import STRING, Schema, array, from_json, object_schema
from answerbox.processors.text.words import QUESTION_WORDS, terms, tokens

__all__ = ["KEYWORDS_SCHEMA", "MAX_KEYWORDS", "fallback_keywords", "parse_keywords", "read_keywords"]

# "Extract at most three keywords" (paper Table 7).
MAX_KEYWORDS = 3
KEYWORDS_SCHEMA = Schema("keywords", object_schema(keywords=array(STRING, MAX_KEYWORDS)))

_PREFIX = re.compile(r"^\s*(?:query|keywords?)\s*:\s*", re.IGNORECASE)
_TRIM = " \t\"'`“”‘’.;:[]()"


def _from_question(keywords: list[str], question: str) -> list[str]:
    """The keywords that come from the question, at most ``MAX_KEYWORDS``."""
    asked = terms(question, QUESTION_WORDS)
    trimmed = (k.strip(_TRIM) for k in keywords)
    return [k for k in dict.fromkeys(trimmed) if terms(k, QUESTION_WORDS) & asked][:MAX_KEYWORDS]


def parse_keywords(completion: str, question: str) -> list[str]:
    """The keywords of the first non-empty line of the LLM's answer that come from the question."""
    line = next((line for line in completion.splitlines() if line.strip()), "")
    return _from_question(_PREFIX.sub("", line).split(","), question)


class _JSONKeywords(BaseModel):
    keywords: list[str] = []


def read_keywords(completion: str, question: str, structured: bool) -> list[str]:
    """The keywords of a reply: JSON when ``structured`` was asked for and came back, else the text format."""
    found = from_json(_JSONKeywords, completion) if structured else None
    if found is None:
        return parse_keywords(completion, question)
    # A small model may put the paper's comma-separated line into one string.
    return _from_question([part for k in found.keywords for part in k.split(",")], question)


def fallback_keywords(question: str) -> list[str]:
    """The question's content-word phrases, in order; empty only when the question has none."""
    phrases: list[list[str]] = [[]]
    for token in tokens(question):
        if token.lower() in QUESTION_WORDS:
            if phrases[-1]:
                phrases.append([])
        else:
            phrases[-1].append(token)
    return list(dict.fromkeys(" ".join(words) for words in phrases if words))
