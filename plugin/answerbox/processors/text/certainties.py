"""What the rules settle about a claim against one block before any model reads it.

Cheap and exact, in this order: a copy of a sentence is ``entailed``; a sentence misquoted (a
name, a number or the reader's answer swapped: ``misquotes``) or a quantity misstated
(``quantities``) is ``contradicted``. None: the rules leave it open, for the verifier (or the
evaluator's score) to decide. Each rule reads bounded text (``bounded``); the caller runs this
off the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from answerbox.processors.text.copies import copied
from answerbox.processors.text.misquotes import misquoted
from answerbox.processors.text.quantities import misstated_quantity

__all__ = ["Certainty", "Rule", "certainty"]

Rule = Literal["copy", "misquote", "quantity"]


@dataclass(frozen=True, slots=True)
class Certainty:
    entailed: bool  # else contradicted
    sentence: tuple[int, int]  # the block's sentence the claim copies, or that says otherwise
    rule: Rule


def certainty(claim: str, block: str, question: str = "", answer: str = "") -> Certainty | None:
    """What the rules settle about ``claim`` against ``block``; ``answer``: the reader's answer to
    ``question`` in the block."""
    if (span := copied(claim, block)) is not None:
        return Certainty(True, span, "copy")
    if (span := misquoted(claim, block, question, answer)) is not None:
        return Certainty(False, span, "misquote")
    if (span := misstated_quantity(claim, block)) is not None:
        return Certainty(False, span, "quantity")
    return None
