"""The LLM's streamed text, held back until each sentence is whole, so it can be checked first.

A sentence is whole once the next one has begun: until then the markers after its stop
("... in 1965. [1]") may still be on their way. What is left when the LLM stops is the last
sentence. The processor checks each whole sentence as ``_checked`` checks a whole answer, and
only a sentence that holds up is streamed (``event: sentence``); a page never shows text that
no one checked.
"""

from __future__ import annotations

from answerbox.processors.text.claims import parse_claims

__all__ = ["SentenceHold"]


class SentenceHold:
    def __init__(self) -> None:
        self._text = ""

    def feed(self, text: str) -> list[str]:
        """The sentences ``text`` completed, in order (none while the first is still open)."""
        self._text += text
        claims = parse_claims(self._text)
        if len(claims) < 2:
            return []
        whole = [self._text[c.start : c.end] for c in claims[:-1]]
        self._text = self._text[claims[-1].start :]
        return whole

    def flush(self) -> list[str]:
        """The last sentence, once the LLM has stopped."""
        rest, self._text = self._text.strip(), ""
        return [rest] if rest else []
