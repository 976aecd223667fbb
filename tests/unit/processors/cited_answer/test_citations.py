"""The cited answer's claims: a JSON reply written back as cited sentences, and split into claims."""

from __future__ import annotations

import json

from answerbox.processors.cited_answer.citations import parse_claims, read_answer


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
    assert read_answer('{"sentences": [{"text": "Frank', structured=True) == '{"sentences": [{"text": "Frank'
    assert read_answer(reply, structured=False) == reply
