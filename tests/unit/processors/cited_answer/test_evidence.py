"""Evidence blocks from hits: a highlight's fragments are found back in the field, in field order."""

from __future__ import annotations

import pytest
from answerbox.processors.cited_answer.evidence import EvidenceFields, evidence_from_hits

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
