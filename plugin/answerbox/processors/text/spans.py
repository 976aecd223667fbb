"""Spans of hits: the one way a processor names the text it read in a search response.

Whatever a processor keeps or cites (a CRAG strip, an evidence excerpt, a quoted
sentence, the reader's answer for a chain node) must point back at the exact characters
of the hit, so every one of them is a ``Span``: characters ``start:end`` of one field of
one hit, with their text (``_source[field][start:end] == text``). A ``Passage`` is a whole
field, the text a model reads; ``Passage.span`` cuts spans out of it. ``Span.wire`` gives
the response's form of a span (``answerbox.core.contract.TextSpan`` and its subclasses).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, TypeVar

from answerbox.core.contract import TextSpan
from answerbox.processors.text.sentences import sentence_spans

__all__ = ["HitField", "Passage", "Span"]

W = TypeVar("W", bound=TextSpan)


@dataclass(frozen=True, slots=True)
class HitField:
    """``_source[field]`` of the hit ``(index, id)``: what a span's offsets count in."""

    index: str
    id: str
    field: str


@dataclass(frozen=True, slots=True)
class Passage(HitField):
    """The field's whole text."""

    text: str

    def span(self, start: int, end: int) -> Span:
        return Span(self.index, self.id, self.field, start, end, self.text[start:end])


@dataclass(frozen=True, slots=True)
class Span(HitField):
    """Characters ``start:end`` of the field, with their text."""

    start: int
    end: int
    text: str

    def sentences(self) -> list[Span]:
        """The span's sentences, each a span of the same field."""
        return [
            replace(self, start=self.start + start, end=self.start + end, text=self.text[start:end])
            for start, end in sentence_spans(self.text)
        ]

    def wire(self, kind: type[W], **extra: Any) -> W:
        """The span as the response writes it: ``kind`` is ``TextSpan`` or a subclass, whose
        own fields (a piece's ``text``, a strip's ``score``, a citation's ``quote``) are ``extra``."""
        return kind(index=self.index, id=self.id, field=self.field, start=self.start, end=self.end, **extra)
