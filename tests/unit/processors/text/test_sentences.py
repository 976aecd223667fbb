"""Sentence splitting, as CRAG's strips and the citation check use it."""

from __future__ import annotations

from answerbox.processors.text.sentences import sentence_spans


def test_sentence_splitter_survives_abbreviations_decimals_and_initials() -> None:
    text = (
        "Dr. J. R. R. Tolkien taught at Oxford, e.g. in 1925. It cost $3.50 in the U.S. market! "
        'Was it good? "Yes." Mr. Smith said so.\n\nA new paragraph'
    )
    assert [text[a:b] for a, b in sentence_spans(text)] == [
        "Dr. J. R. R. Tolkien taught at Oxford, e.g. in 1925.",
        "It cost $3.50 in the U.S. market!",
        "Was it good?",
        '"Yes."',
        "Mr. Smith said so.",
        "A new paragraph",
    ]
    assert sentence_spans("  \n ") == []
