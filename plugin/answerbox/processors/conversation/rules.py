"""A follow-up made standalone without any LLM: the earlier question's subject and entities
carried into it.

"Who won Super Bowl 50?" then "Where was it played?": the follow-up refers back (``it``) and
alone finds nothing. The rule:

- a follow-up *refers back* when it holds a pronoun or a demonstrative ("it", "its", "they",
  "that", "there", ...), or has fewer than three content words ("And the year?");
- its first pronoun or possessive is replaced by the earlier question's *subject*, its longest
  *entity* (a run of capitalised words or numbers, the leading question word left out):
  "Where was Super Bowl 50 played?";
- the search also gets the earlier question's other entities and content words the standalone
  question lacks (``Rewrite.query``): retrieval needs the topic, the reader the question.

A follow-up that refers back to nothing stays as it is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from answerbox.processors.text.words import FUNCTION_WORDS

__all__ = ["Rewrite", "content_words", "entities", "standalone"]

# Stand for the earlier question's subject; replaced by it.
_PRONOUNS = frozenset({"it", "he", "she", "they", "him", "them", "this", "that", "these", "those"})
_POSSESSIVES = frozenset({"its", "his", "her", "their"})
# Refer back, but to a place or a time: the subject is carried, not substituted.
_REFERS = _PRONOUNS | _POSSESSIVES | frozenset({"there", "then", "one"})
_MIN_CONTENT_WORDS = 3
_EDGE = "\"'“”‘’()[]{},.;:!?"
_WORD = re.compile(r"\S+")


@dataclass(frozen=True, slots=True)
class Rewrite:
    question: str  # standalone: what the evaluator, the chain and the reader read
    query: str  # what the search sends: the question and what else it carried
    rewritten: bool  # False: the follow-up stood alone, or there was nothing to carry


def _bare(word: str) -> str:
    word = word.strip(_EDGE)
    return word[:-2] if word.lower().endswith(("'s", "’s")) else word


def content_words(text: str) -> list[str]:
    """The words that carry what ``text`` asks, bare (edge marks and a possessive's ``'s`` cut), in order."""
    return [b for w in text.split() if (b := _bare(w)) and b.lower() not in FUNCTION_WORDS]


def entities(text: str) -> list[str]:
    """Runs of capitalised words or numbers, in order; a question's first word starts none
    unless it is capitalised inside the run (``What`` in "What Denver ..." is not a name)."""
    found: list[str] = []
    run: list[str] = []
    for i, raw in enumerate(text.split()):
        word = _bare(raw)
        named = (
            bool(word) and (word[0].isupper() or word[0].isdigit()) and not (i == 0 and word.lower() in FUNCTION_WORDS)
        )
        if named:
            run.append(word)
        if run and (not named or raw.rstrip(_EDGE) != raw.rstrip() or word != raw.strip(_EDGE)):
            # A run ends at an unnamed word, at punctuation, or at a possessive.
            found.append(" ".join(run))
            run = []
    if run:
        found.append(" ".join(run))
    return list(dict.fromkeys(found))


def _refers_back(question: str) -> bool:
    words = [_bare(w).lower() for w in question.split()]
    return any(w in _REFERS for w in words) or len(content_words(question)) < _MIN_CONTENT_WORDS


def _substituted(question: str, subject: str) -> str | None:
    """The question with its first pronoun (or possessive) as ``subject``; None when it has none."""
    for match in _WORD.finditer(question):
        raw = match.group()
        word = raw.strip(_EDGE).lower()
        if word in _PRONOUNS or word in _POSSESSIVES:
            replacement = f"{subject}'s" if word in _POSSESSIVES else subject
            lead = raw[: len(raw) - len(raw.lstrip(_EDGE))]
            trail = raw[len(raw.rstrip(_EDGE)) :]
            return question[: match.start()] + lead + replacement + trail + question[match.end() :]
    return None


def standalone(question: str, previous: str) -> Rewrite:
    """``question`` read after ``previous`` (the earlier turn's own standalone question)."""
    names = entities(previous)
    if not previous.strip() or not _refers_back(question):
        return Rewrite(question, question, False)
    subject = max(names, key=lambda name: len(name.split()), default=None)
    rewritten = _substituted(question, subject) if subject else None
    if rewritten is None:
        # Nothing to substitute: the subject goes with the question, so the reader sees it too.
        carried = subject or " ".join(content_words(previous))
        rewritten = f"{question} ({carried})" if carried else question
    has = {w.lower() for w in content_words(rewritten)}
    extra = [w for w in content_words(" ".join([*names, previous])) if w.lower() not in has]
    query = " ".join([rewritten, *dict.fromkeys(extra)])
    return Rewrite(rewritten, query, rewritten != question)
