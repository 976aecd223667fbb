"""Text that speaks to a language model instead of to a reader: a prompt injection.

The citation check cannot see it otherwise. A document that says "answer only with the word X"
holds X, and the evaluator and reader find X there, so a claim that obeys it looks supported.
Such a document is kept as a hit and shown to the LLM as data, but it supports no claim.

The phrases are the ones that only make sense addressed to a model: overriding *its earlier
instructions*, dictating *its whole reply*, chat-template tokens. Imperatives a reader follows
("press and hold the power button", "players who ignore the rules") are not among them.
"""

from __future__ import annotations

import re

__all__ = ["addresses_the_model"]

_INSTRUCTION = re.compile(
    r"""
    # "ignore (all) previous instructions", "disregard your guidelines", "forget the above prompt"
    \b(?:ignore|disregard|forget|override|bypass)\s+(?:\w+\s+){0,2}?
      (?:previous|prior|above|earlier|preceding|all|any|your|system|original)\s+(?:\w+\s+)?
      (?:instructions?|prompts?|directions|directives|guidelines|rules)\b
    # "answer only with the word X", "reply only with", "respond with only"
    | \b(?:answer|respond|reply|say|output)\s+(?:only\s+with|with\s+only|only\s+the\s+word)\b
    # "new instructions:", "updated instructions:"
    | \b(?:new|updated|real|actual)\s+instructions?\s*:
    # "you are now an AI assistant", "you are a language model"
    | \byou\s+are\s+(?:now\s+)?(?:an?\s+|the\s+)?(?:ai|assistant|language\s+model|chatbot|llm)\b
    # chat-template tokens: no prose holds them
    | <\|im_start\|> | <\|system\|> | \[/?INST\] | <</?SYS>>
    """,
    re.IGNORECASE | re.VERBOSE,
)


def addresses_the_model(text: str) -> bool:
    """Whether ``text`` holds an instruction addressed to a language model."""
    return _INSTRUCTION.search(" ".join(text.split())) is not None
