"""FreshPrompt evidence: numbered blocks built from hits, refined strips or chain references.

Every block is one field of one hit (a ``HitField``) and its excerpts are ``Span``s of it
(absolute character offsets), so a citation of block ``[k]`` can point at the exact
supporting text in the hit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime

from pydantic import BaseModel, ConfigDict, field_validator

from answerbox.core.contract import AnswerboxReport, Citation, PassagePiece
from answerbox.pipeline.base import JSON
from answerbox.processors.text.instructions import addresses_the_model
from answerbox.processors.text.passages import hit_key, passages_of
from answerbox.processors.text.sentences import sentence_spans
from answerbox.processors.text.spans import HitField, Passage, Span

EVIDENCE_SIZE = 5  # evidence blocks an answer reads (the papers' n)
SNIPPET_CHARS = 1000  # a block's excerpt, at most
READING_CHARS = 2000  # the reader's context around its excerpts: about two of its windows

__all__ = [
    "EVIDENCE_SIZE",
    "READING_CHARS",
    "SNIPPET_CHARS",
    "Evidence",
    "EvidenceFields",
    "answer_evidence",
    "evidence_from_hits",
    "evidence_from_references",
    "in_context",
    "number",
    "written_date",
]

_TAG = re.compile(r"</?em>")
_EM = re.compile(r"<em>(.*?)</em>", re.DOTALL)
_SEPARATOR = " … "


class EvidenceFields(BaseModel):
    """Which ``_source`` fields fill the block's lines (dotted paths allowed)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str = "text"
    title: str | None = "title"
    date: str | None = None
    source: str | None = None  # None: the hit's index

    @field_validator("text", "title", "date", "source")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("a field name must not be blank")
        return value


@dataclass(frozen=True, slots=True, kw_only=True)
class Evidence(HitField):
    """A numbered block of the prompt: excerpts of one field of one hit, and how to present them."""

    excerpts: tuple[Span, ...]  # spans of this field, in field order
    rank: int  # retrieval order, 0 first
    marker: int = 0  # [k], set by ``number``
    source: str = ""
    title: str = ""
    published: date | None = None
    highlight: str = ""

    @property
    def snippet(self) -> str:
        return _SEPARATOR.join(p.text for p in self.excerpts)

    @property
    def instructs(self) -> bool:
        """Whether the snippet speaks to the model: then it is shown as data but cites nothing."""
        return addresses_the_model(self.snippet)

    @property
    def date_text(self) -> str:
        return written_date(self.published) if self.published else ""

    def sentences(self) -> list[Span]:
        return [s for e in self.excerpts for s in e.sentences()]

    def cite(self, quote: Span, support: float | None) -> Citation:
        """The citation of this block's ``[marker]`` by one of its sentences."""
        return quote.wire(
            Citation, marker=self.marker, quote=quote.text, support=None if support is None else round(support, 4)
        )

    def locate(self, start: int) -> Span:
        """The sentence holding ``snippet[start]``, in field offsets (the reader reads the snippet)."""
        offset = 0
        for excerpt in self.excerpts:
            if start < offset + len(excerpt.text):
                absolute = excerpt.start + max(start - offset, 0)
                for sentence in excerpt.sentences():
                    if sentence.end > absolute:
                        return sentence
                break
            offset += len(excerpt.text) + len(_SEPARATOR)
        return self.excerpts[-1]


def written_date(day: date) -> str:
    """FreshPrompt's date form: "Jul 18, 2023"."""
    return f"{day:%b} {day.day}, {day.year}"


def _string(hit: JSON, field: str | None) -> str:
    found = passages_of(hit, [field]) if field else []
    return found[0].text if found else ""


def _parse_date(value: str) -> date | None:
    """ISO dates and datetimes (OpenSearch's default ``date`` format); anything else is undated."""
    try:
        return datetime.fromisoformat(value.strip()).date() if value.strip() else None
    except ValueError:
        return None


def _highlighted(passage: Passage, fragments: Sequence[str], max_chars: int) -> list[Span]:
    """OpenSearch's highlight fragments, found back in the field so they keep their offsets; the
    first ``max_chars`` of them, as a block without a highlight: the caller writes the highlight,
    and ``number_of_fragments: 0`` makes the whole field one fragment (4 MB held the loop 1 s)."""
    found = []
    for fragment in fragments:
        plain = _TAG.sub("", fragment)
        start = passage.text.find(plain)
        if plain.strip() and start >= 0:
            found.append((start, start + len(plain)))
    excerpts, left = [], max_chars
    for start, end in sorted(set(found)):  # a set's order changes with the hash seed
        if left <= 0:
            break
        end = start + _cut(passage.text[start:end], left)
        excerpts.append(passage.span(start, end))
        left -= end - start
    return excerpts


def _cut(text: str, max_chars: int) -> int:
    """How much of ``text`` to keep: all of it, or up to its last sentence end within
    ``max_chars`` when there is one in the second half, else ``max_chars``."""
    if len(text) <= max_chars:
        return len(text)
    cut = max(text.rfind(mark, 0, max_chars) for mark in (". ", "! ", "? "))
    return cut + 1 if cut > max_chars // 2 else max_chars


def _leading(passage: Passage, max_chars: int) -> Span:
    """The start of the field, cut at the last sentence end within ``max_chars`` when there is one."""
    return passage.span(0, _cut(passage.text, max_chars))


def _evidence(
    excerpts: Sequence[Span], hit: JSON, fields: EvidenceFields, *, rank: int, highlight: str = ""
) -> Evidence:
    """A block of ``excerpts`` (spans of one field); title, date and source come from ``hit``."""
    where = excerpts[0]
    return Evidence(
        index=where.index,
        id=where.id,
        field=where.field,
        excerpts=tuple(excerpts),
        rank=rank,
        source=_string(hit, fields.source) or where.index,
        title=_string(hit, fields.title),
        published=_parse_date(_string(hit, fields.date)),
        highlight=highlight,
    )


def evidence_from_hits(hits: Sequence[JSON], fields: EvidenceFields, *, snippet_chars: int) -> list[Evidence]:
    """One block per hit with text in ``fields.text``; the snippet is the highlight when there is one."""
    found = []
    for rank, hit in enumerate(hits):
        passages = passages_of(hit, [fields.text])
        if not passages:
            continue
        fragments = (hit.get("highlight") or {}).get(fields.text) or []
        excerpts = _highlighted(passages[0], fragments, snippet_chars) or [_leading(passages[0], snippet_chars)]
        words = dict.fromkeys(w.strip() for f in fragments for w in _EM.findall(f) if w.strip())
        found.append(_evidence(excerpts, hit, fields, rank=rank, highlight=" | ".join(words)))
    return found


def evidence_from_references(
    references: Sequence[PassagePiece], hits: Sequence[JSON], fields: EvidenceFields
) -> list[Evidence]:
    """Blocks from pieces other processors kept.

    Title, date and source come from the same document's hit when the response holds it.
    """
    by_id = {hit_key(h): h for h in hits}
    return [
        _evidence(
            [Span(ref.index, ref.id, ref.field, ref.start, ref.start + len(ref.text), ref.text)],
            by_id.get((ref.index, ref.id), {}),
            fields,
            rank=rank,
        )
        for rank, ref in enumerate(references)
        if ref.text.strip()
    ]


def answer_evidence(
    report: AnswerboxReport, hits: Sequence[JSON], fields: EvidenceFields, *, size: int, snippet_chars: int
) -> list[Evidence]:
    """An answer's numbered evidence: what earlier processors kept (``AnswerboxReport.kept_passages``), else the top
    ``size`` hits."""
    kept = report.kept_passages()
    found = (
        evidence_from_references(kept, hits, fields)
        if kept is not None
        else evidence_from_hits(hits[:size], fields, snippet_chars=snippet_chars)
    )
    return number(found, size)


def number(evidence: Sequence[Evidence], keep: int) -> list[Evidence]:
    """FreshPrompt order: undated first, then oldest to newest, so the newest sits next to the
    question; among equals the more relevant comes later. The last ``keep`` are numbered [1..n]."""
    ordered = sorted(evidence, key=lambda e: (e.published is not None, e.published or date.min, -e.rank))
    kept = ordered[-keep:] if keep else []
    return [replace(e, marker=k) for k, e in enumerate(kept, start=1)]


def in_context(evidence: Sequence[Evidence], hits: Sequence[JSON], *, max_chars: int) -> list[Evidence]:
    """What the reader reads: one block per field of a hit, its excerpts joined into one span of
    the field and grown by whole sentences (the one before first) up to ``max_chars``.

    The reader was trained on whole paragraphs; a CRAG strip or a highlight fragment cut out of
    one loses the sentence that says who "he" is. A block keeps the marker and rank of its most
    relevant excerpt. Blocks whose hit the response does not hold (a corrective search's
    strips, a chain's references), or whose excerpts lie more than ``max_chars`` apart, are
    read as they are.
    """
    by_key = {hit_key(h): h for h in hits}
    groups: dict[tuple[str, str, str], list[Evidence]] = {}
    for block in evidence:
        groups.setdefault((block.index, block.id, block.field), []).append(block)
    read: list[Evidence] = []
    for (index, doc_id, field), blocks in groups.items():
        hit = by_key.get((index, doc_id))
        passage = next(iter(passages_of(hit, [field])), None) if hit is not None else None
        excerpts = [e for b in blocks for e in b.excerpts]
        start, end = min(e.start for e in excerpts), max(e.end for e in excerpts)
        if passage is None or any(passage.text[e.start : e.end] != e.text for e in excerpts):
            read.extend(blocks)  # its offsets are not this hit's: nothing to widen safely
        elif end - start > max_chars:
            read.extend(blocks)  # far apart in a long field: the span between would cost more than it tells
        else:
            first = min(blocks, key=lambda b: b.rank)
            read.append(replace(first, excerpts=(_grown(passage, start, end, max_chars),)))
    return read


def _grown(passage: Passage, start: int, end: int, max_chars: int) -> Span:
    """``passage[start:end]`` grown by whole sentences, alternately before and after, within ``max_chars``.

    Only the text within ``max_chars`` of the span is split: a field of megabytes, split whole,
    held the event loop for a third of a second. A sentence the window cuts is left out."""
    text = passage.text
    low, high = max(0, start - max_chars), min(len(text), end + max_chars)
    sentences = [(s + low, e + low) for s, e in sentence_spans(text[low:high])]
    sentences = sentences[1 if low > 0 else 0 : -1 if high < len(text) else None]
    before = sorted((s for s, _ in sentences if s < start), reverse=True)
    after = sorted(e for _, e in sentences if e > end)
    grown = True
    while grown:
        grown = False
        if before and end - before[0] <= max_chars:
            start, grown = before.pop(0), True
        if after and after[0] - start <= max_chars:
            end, grown = after.pop(0), True
    return passage.span(start, end)
