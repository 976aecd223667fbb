"""Evidence blocks from hits: a highlight's fragments are found back in the field, in field order;
what the reader reads is each hit's excerpts grown back into their sentences."""

from __future__ import annotations

import pytest
from answerbox.core.contract import KnowledgeStrip
from answerbox.processors.answering.evidence import (
    EvidenceFields,
    evidence_from_hits,
    evidence_from_references,
    in_context,
    number,
)

TEXT = "Dune is a novel. Frank Herbert wrote Dune in 1965. It won the Hugo Award."
FRAGMENTS = [
    "<em>Frank</em> Herbert wrote <em>Dune</em> in 1965.",
    "<em>Frank</em> Herbert",
    "<em>Dune</em> is a novel.",
]


@pytest.mark.parametrize("fragments", [FRAGMENTS, FRAGMENTS[::-1]], ids=["as-sent", "reversed"])
def test_fragments_become_excerpts_in_field_order_whatever_their_order(fragments: list[str]) -> None:
    hit = {"_index": "books", "_id": "dune", "_source": {"text": TEXT}, "highlight": {"text": fragments}}
    (block,) = evidence_from_hits([hit], EvidenceFields(title=None), snippet_chars=1000)
    # Two fragments start at "Frank": the shorter first, on every hash seed.
    assert [(e.start, e.text) for e in block.excerpts] == [
        (0, "Dune is a novel."),
        (17, "Frank Herbert"),
        (17, "Frank Herbert wrote Dune in 1965."),
    ]
    assert sorted(block.highlight.split(" | ")) == ["Dune", "Frank"]  # each matched word once


def test_a_fragment_not_in_the_field_is_dropped_and_no_fragment_leaves_the_fields_start() -> None:
    hit = {"_index": "books", "_id": "dune", "_source": {"text": TEXT}, "highlight": {"text": ["<em>Arrakis</em>"]}}
    (block,) = evidence_from_hits([hit], EvidenceFields(title=None), snippet_chars=20)
    assert [e.text for e in block.excerpts] == ["Dune is a novel."]  # cut at the last sentence end within 20


LONG = "Ann met Bo. She was a pilot. He flew too. They wed in 1990. Both retired. The end came."
HIT = {"_index": "people", "_id": "ann", "_source": {"text": LONG}}


def _strip(text: str, score: float) -> KnowledgeStrip:
    start = LONG.index(text)
    return KnowledgeStrip(
        index="people", id="ann", field="text", start=start, end=start + len(text), text=text, score=score
    )


def test_the_reader_reads_a_hits_strips_as_one_span_grown_by_sentences_before_first() -> None:
    # Two strips of one hit, the later one more relevant: FreshPrompt order puts it last.
    strips = [_strip("They wed in 1990.", 0.9), _strip("He flew too.", 0.4)]
    blocks = number(evidence_from_references(strips, [HIT], EvidenceFields(title=None)), 5)
    (read,) = in_context(blocks, [HIT], max_chars=50)
    # "He flew too. They wed in 1990." (30) grows by "She was a pilot." before (47), then
    # nothing fits: " Both retired." would make 61, "Ann met Bo. " 59.
    assert [e.text for e in read.excerpts] == ["She was a pilot. He flew too. They wed in 1990."]
    assert LONG[read.excerpts[0].start : read.excerpts[0].end] == read.excerpts[0].text
    most_relevant = next(b for b in blocks if b.excerpts[0].text == "They wed in 1990.")
    assert (read.marker, read.rank) == (most_relevant.marker, most_relevant.rank)


def test_with_room_the_reader_reads_the_whole_field() -> None:
    blocks = evidence_from_references([_strip("He flew too.", 0.5)], [HIT], EvidenceFields(title=None))
    (read,) = in_context(blocks, [HIT], max_chars=1000)
    assert read.snippet == LONG


def test_strips_further_apart_than_the_reading_are_read_as_they_are() -> None:
    strips = [_strip("Ann met Bo.", 0.9), _strip("The end came.", 0.4)]
    blocks = evidence_from_references(strips, [HIT], EvidenceFields(title=None))
    assert in_context(blocks, [HIT], max_chars=len(LONG) - 1) == blocks
    (read,) = in_context(blocks, [HIT], max_chars=len(LONG))
    assert read.snippet == LONG


def test_strips_whose_hit_the_response_lacks_or_contradicts_are_read_as_they_are() -> None:
    # A corrective search's strip has no hit here; another's text no longer matches its offsets.
    other = {"_index": "people", "_id": "ann", "_source": {"text": "Rewritten since. " + LONG}}
    blocks = evidence_from_references([_strip("He flew too.", 0.5)], [], EvidenceFields(title=None))
    assert in_context(blocks, [], max_chars=1000) == blocks
    assert in_context(blocks, [other], max_chars=1000) == blocks
