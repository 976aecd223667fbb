"""FreshPrompt evidence: numbered blocks built from hits, refined strips or chain references.

Every block keeps where its text lives (``_index``, ``_id``, field and absolute character
offsets), so a citation of block ``[k]`` can point at the exact supporting text in the hit.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime

from pydantic import BaseModel, ConfigDict, field_validator

from answerbox.contract import AnswerboxReport, Citation, PassagePiece
from answerbox.pipeline.base import JSON
from answerbox.processors.text.instructions import addresses_the_model
from answerbox.processors.text.passages import hit_key, passages_of
from answerbox.processors.text.sentences import sentence_spans

__all__ = [
    "Evidence",
    "EvidenceFields",
    "Excerpt",
    "Sentence",
    "answer_evidence",
    "evidence_from_hits",
    "evidence_from_references",
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


@dataclass(frozen=True, slots=True)
class Sentence:
    start: int  # absolute offsets in the hit's field
    end: int
    text: str


@dataclass(frozen=True, slots=True)
class Excerpt:
    """A contiguous piece of the field: ``field_text[start:end] == text``."""

    start: int
    end: int
    text: str

    def sentences(self) -> Iterator[Sentence]:
        for start, end in sentence_spans(self.text):
            yield Sentence(self.start + start, self.start + end, self.text[start:end])


@dataclass(frozen=True, slots=True, kw_only=True)
class Evidence:
    index: str
    id: str
    field: str
    excerpts: tuple[Excerpt, ...]
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

    def sentences(self) -> list[Sentence]:
        return [s for p in self.excerpts for s in p.sentences()]

    def cite(self, quote: Sentence, support: float | None) -> Citation:
        return Citation(
            marker=self.marker,
            index=self.index,
            id=self.id,
            field=self.field,
            start=quote.start,
            end=quote.end,
            quote=quote.text,
            support=None if support is None else round(support, 4),
        )

    def locate(self, start: int) -> Sentence:
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
        last = self.excerpts[-1]
        return Sentence(last.start, last.end, last.text)


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


def _highlighted(field_text: str, fragments: Sequence[str]) -> list[Excerpt]:
    """OpenSearch's highlight fragments, found back in the field so they keep their offsets."""
    excerpts = []
    for fragment in fragments:
        plain = _TAG.sub("", fragment)
        start = field_text.find(plain)
        if plain.strip() and start >= 0:
            excerpts.append(Excerpt(start, start + len(plain), plain))
    return sorted(set(excerpts), key=lambda e: e.start)


def _leading(field_text: str, max_chars: int) -> Excerpt:
    """The start of the field, cut at the last sentence end within ``max_chars`` when there is one."""
    if len(field_text) <= max_chars:
        return Excerpt(0, len(field_text), field_text)
    cut = max(field_text.rfind(mark, 0, max_chars) for mark in (". ", "! ", "? "))
    end = cut + 1 if cut > max_chars // 2 else max_chars
    return Excerpt(0, end, field_text[:end])


def evidence_from_hits(hits: Sequence[JSON], fields: EvidenceFields, *, snippet_chars: int) -> list[Evidence]:
    """One block per hit with text in ``fields.text``; the snippet is the highlight when there is one."""
    found = []
    for rank, hit in enumerate(hits):
        field_text = _string(hit, fields.text)
        if not field_text.strip():
            continue
        fragments = (hit.get("highlight") or {}).get(fields.text) or []
        excerpts = _highlighted(field_text, fragments) or [_leading(field_text, snippet_chars)]
        words = dict.fromkeys(w.strip() for f in fragments for w in _EM.findall(f) if w.strip())
        found.append(
            Evidence(
                index=str(hit.get("_index", "")),
                id=str(hit.get("_id", "")),
                field=fields.text,
                excerpts=tuple(excerpts),
                rank=rank,
                source=_string(hit, fields.source) or str(hit.get("_index", "")),
                title=_string(hit, fields.title),
                published=_parse_date(_string(hit, fields.date)),
                highlight=" | ".join(words),
            )
        )
    return found


def evidence_from_references(
    references: Sequence[PassagePiece], hits: Sequence[JSON], fields: EvidenceFields
) -> list[Evidence]:
    """Blocks from pieces other processors kept.

    Title, date and source come from the same document's hit when the response holds it.
    """
    by_id = {hit_key(h): h for h in hits}
    found = []
    for rank, ref in enumerate(references):
        if not ref.text.strip():
            continue
        index, doc_id = ref.index, ref.id
        hit = by_id.get((index, doc_id), {})
        found.append(
            Evidence(
                index=index,
                id=doc_id,
                field=ref.field,
                excerpts=(Excerpt(ref.start, ref.start + len(ref.text), ref.text),),
                rank=rank,
                source=_string(hit, fields.source) or index,
                title=_string(hit, fields.title),
                published=_parse_date(_string(hit, fields.date)),
            )
        )
    return found


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
