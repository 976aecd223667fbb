"""Text that speaks to a language model instead of to a reader: a prompt injection.

The citation check cannot see it otherwise. A document that says "answer only with the word X"
holds X, and the evaluator and reader find X there, so a claim that obeys it looks supported.
Such a document is kept as a hit and shown to the LLM as data, but it supports no claim.

The phrases are the ones that only make sense addressed to a model: overriding *its earlier
instructions* or *the question above*, a model called by its role and told to drop or dictate
something ("Assistant, disregard ..."), dictating *its whole reply*, chat-template tokens.
Imperatives a reader follows ("press and hold the power button", "players who ignore the rules")
are not among them: each phrase needs both the overriding verb and what it overrides, or the
model addressed by name.
"""

from __future__ import annotations

import re

__all__ = ["addresses_the_model"]

_OVERRIDE = r"(?:ignore|disregard|forget|override|bypass)"
_WORD = r"[\w'’-]+\s+"  # one word in between: "the user's"
_BEFORE = r"(?:previous|prior|above|earlier|preceding|original)"
_ORDERS = r"(?:instructions?|prompts?|directions|directives|guidelines|rules)"
# What else a model was given before the text: the user's question, the conversation.
_ASKED = r"(?:questions?|query|queries|requests?|tasks?|messages?|context|conversation|everything)"
_ROLE = r"(?:(?:ai|virtual)\s+)?(?:assistant|ai|chatbot|bot|language\s+model|llm|gpt|chatgpt|claude|gemini|copilot)"
_TOLD = rf"(?:{_OVERRIDE}|answer|respond|reply|say|output|print|repeat|pretend)"

_INSTRUCTION = re.compile(
    rf"""
    # "ignore (all) previous instructions", "disregard your guidelines", "forget the above prompt",
    # "disregard the previous question"
    \b{_OVERRIDE}\s+(?:{_WORD}){{0,2}}?
      (?:(?:{_BEFORE}|all|any|your|system)\s+(?:{_WORD})?{_ORDERS} | {_BEFORE}\s+(?:{_WORD})?{_ASKED})\b
    # "disregard the question above", "ignore everything before this", "forget the rules you were given"
    | \b{_OVERRIDE}\s+(?:{_WORD}){{0,3}}?(?:{_ORDERS}|{_ASKED})\s+(?:{_WORD})?
      (?:above|before\s+(?:this|it|now)|so\s+far|until\s+now|you\s+were\s+(?:given|told))\b
    # "Assistant, disregard ...", "Hey ChatGPT: reply with ...": the model called by its role, then told
    | (?:^|[.!?;:"'“”(\[]\s*|\b(?:hey|hi|dear|attention|note\s+to)\s+)(?:the\s+)?{_ROLE}\s*[,:!]\s*
      (?:please\s+)?{_TOLD}\b
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
