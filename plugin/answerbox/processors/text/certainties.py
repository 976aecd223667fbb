"""What the rules settle about a claim against one block before any model reads it.

Cheap and exact, in this order: a copy of a sentence is ``entailed``; a sentence misquoted (a
name, a number or the reader's answer swapped: ``misquotes``) or a quantity misstated
(``quantities``) is ``contradicted``; one that shares its words with the block but may say
something else (``doubts``) is ``unverified`` unless the verifier says otherwise. None: the
rules leave it open, for the verifier (or the evaluator's score) to decide. Each rule reads
bounded text (``bounded``); the caller runs this off the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from answerbox.processors.text.copies import copied
from answerbox.processors.text.doubts import doubted
from answerbox.processors.text.misquotes import misquoted
from answerbox.processors.text.quantities import misstated_quantity

__all__ = ["Certainty", "Rule", "certainty"]

Rule = Literal["copy", "misquote", "quantity", "doubt"]
Settled = Literal["entailed", "contradicted", "unverified"]


@dataclass(frozen=True, slots=True)
class Certainty:
    verdict: Settled  # unverified (a doubt): unless the verifier entails it
    sentence: tuple[int, int]  # the block's sentence the claim copies, or that says otherwise
    rule: Rule

    @property
    def entailed(self) -> bool:
        return self.verdict == "entailed"


def certainty(claim: str, block: str, question: str = "", answer: str = "") -> Certainty | None:
    """What the rules settle about ``claim`` against ``block``; ``answer``: the reader's answer to
    ``question`` in the block."""
    if (span := copied(claim, block)) is not None:
        return Certainty("entailed", span, "copy")
    if (span := misquoted(claim, block, question, answer)) is not None:
        return Certainty("contradicted", span, "misquote")
    if (span := misstated_quantity(claim, block)) is not None:
        return Certainty("contradicted", span, "quantity")
    if (span := doubted(claim, block, question, answer)) is not None:
        return Certainty("unverified", span, "doubt")
    return None
