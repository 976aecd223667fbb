"""Sentences and words as the alignment rules read them, bounded in size.

difflib's alignment costs the product of the two word counts, and it runs on every claim: a
block or a sentence of megabytes (a highlight fragment with no stop in it) must not hold a
worker for seconds. A block is read up to ``MAX_BLOCK_CHARS``, a sentence up to
``MAX_SENTENCE_CHARS`` (``clipped`` says it was cut: no claim copies such a sentence whole) and
a claim up to ``MAX_CLAIM_CHARS``; an answer's sentence is never that long.
"""

from __future__ import annotations

from dataclasses import dataclass

from answerbox.processors.text.sentences import sentence_spans

__all__ = ["MAX_BLOCK_CHARS", "MAX_CLAIM_CHARS", "MAX_SENTENCE_CHARS", "BoundedSentence", "claim_text", "sentences"]

MAX_BLOCK_CHARS = 25_000  # a block's snippet is at most 20,000 characters, its separators aside
MAX_SENTENCE_CHARS = 2_000
MAX_CLAIM_CHARS = 1_000


@dataclass(frozen=True, slots=True)
class BoundedSentence:
    span: tuple[int, int]  # where the whole sentence is in the block
    text: str  # at most MAX_SENTENCE_CHARS of it
    clipped: bool


def sentences(block: str) -> list[BoundedSentence]:
    """The sentences of ``block``'s first ``MAX_BLOCK_CHARS``, each clipped to ``MAX_SENTENCE_CHARS``."""
    read = block[:MAX_BLOCK_CHARS]
    return [
        BoundedSentence(
            (start, end), read[start : min(end, start + MAX_SENTENCE_CHARS)], end - start > MAX_SENTENCE_CHARS
        )
        for start, end in sentence_spans(read)
    ]


def claim_text(claim: str) -> str:
    return claim[:MAX_CLAIM_CHARS]
