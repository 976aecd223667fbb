"""A claim that copies a sentence of its block: entailed, with no model.

Small LLMs answer by copying the sentence that holds the answer. When the claim's words are the
sentence's, in order, and nothing else, the block says the claim: no verifier need read it.
Case, punctuation and a few words that carry no fact (articles, forms of "be", relative
pronouns) may differ; every other word, prepositions, negations, comparatives, pronouns and
numbers included, must be the same, so a copy with one fact changed is no copy.
"""

from __future__ import annotations

from answerbox.processors.text.bounded import claim_text, sentences
from answerbox.processors.text.words import tokens

__all__ = ["MIN_WORDS", "copied", "said_words"]

# Words a copy may add, drop or change without changing what it says. Kept short on purpose:
# "not", "before", "more", "he", "or", "from" and "to" all change a fact.
_NEUTRAL = frozenset("a an the is are was were be been being am that which who also".split())
MIN_WORDS = 3  # "Yes." copies nothing


def said_words(text: str) -> list[str]:
    """What a copy must keep of ``text``: its lowercased words, in order, but the neutral ones."""
    return [w for w in (t.lower() for t in tokens(text)) if w not in _NEUTRAL]


def copied(claim: str, block: str) -> tuple[int, int] | None:
    """Where in ``block`` the sentence is that ``claim`` copies, or None when it copies none."""
    said = said_words(claim_text(claim))
    if len(said) < MIN_WORDS:
        return None
    for sentence in sentences(block):
        if not sentence.clipped and said_words(sentence.text) == said:
            return sentence.span
    return None
