"""The cited answer's claims: a JSON reply written back as cited sentences, and split into claims."""

from __future__ import annotations

import json

import pytest
from answerbox.processors.cited_answer.citations import StreamedAnswer, read_answer, without_echoed_fields
from answerbox.processors.text.claims import parse_claims


def test_a_json_answer_is_written_back_as_cited_sentences() -> None:
    reply = json.dumps(
        {
            "sentences": [
                {"text": "Frank Herbert wrote Dune.", "blocks": [1, 2, 1]},
                {"text": "  It was published in 1965 ", "blocks": [1]},
                {"text": "Is it long?", "blocks": []},
                {"text": " . ", "blocks": [3]},
            ]
        }
    )
    text = read_answer(reply, structured=True)
    assert text == "Frank Herbert wrote Dune [1][2]. It was published in 1965 [1]. Is it long?"
    assert [(c.text, c.markers) for c in parse_claims(text)] == [
        ("Frank Herbert wrote Dune [1][2].", [1, 2]),
        ("It was published in 1965 [1].", [1]),
        ("Is it long?", []),
    ]
    assert read_answer(reply, structured=False) == reply
    assert read_answer("Frank Herbert wrote Dune [1].", structured=True) == "Frank Herbert wrote Dune [1]."


def test_json_cut_off_at_max_tokens_keeps_its_whole_sentences_and_shows_no_json() -> None:
    # SmolLM2 runs out of tokens mid-object; what closed is the answer, the rest is dropped.
    cut = '{\n  "sentences": [\n {"text": "Frank \\"Dune\\" Herbert", "blocks": [2, 1]},\n {"text": "It sold a mill'
    assert read_answer(cut, structured=True) == 'Frank "Dune" Herbert [2][1].'
    unmarked = '{"sentences": [{"text": "Dune is a novel.", "blocks": [1'  # its blocks never closed
    assert read_answer(unmarked, structured=True) == "Dune is a novel."
    assert read_answer('{"sentences": [{"text": "Frank', structured=True) == ""


def test_an_echoed_evidence_layout_leaves_only_the_snippets_text() -> None:
    # SmolLM2 often answers by copying a block as the prompt lays it out.
    echoed = (
        "source: squad\ntitle: Normans\ndate: Mar 3, 2015\nsnippet: In 1191, Richard left Messina "
        "[2].\nhighlight: Messina"
    )
    assert without_echoed_fields(echoed) == "In 1191, Richard left Messina [2]."
    # Only a label at a line's start is the layout's: words inside a sentence stay.
    sentence = "The film's title: Dune, from the source: the novel [1]."
    assert without_echoed_fields(sentence) == sentence


@pytest.mark.parametrize(
    "reply",
    [
        json.dumps(
            {"sentences": [{"text": 'Frank "Dune" Herbert.', "blocks": [2]}, {"text": "In 1965.", "blocks": []}]}
        ),
        '{"sentences": [{"text": "Dune is a novel.", "blocks": [1]}, {"text": "It sold", "blocks": [1',
        '{"sentences": [{"text": "Frank',
        "Frank Herbert wrote Dune [1]. It sold well [2].",
        "  \n ",
    ],
)
def test_a_streamed_reply_reads_as_the_whole_reply_reads_however_it_is_cut(reply: str) -> None:
    for size in (1, 3, 7, len(reply) or 1):
        reading = StreamedAnswer()
        pieces = [reading.feed(reply[i : i + size]) for i in range(0, len(reply), size)] + [reading.flush()]
        assert "".join(pieces).strip() == read_answer(reply, structured=True).strip(), size
