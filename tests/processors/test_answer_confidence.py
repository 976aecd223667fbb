"""answer.confidence end to end: answerbox in front of osmem-server with the shipped ONNX
reader/evaluator and its calibrator (the manifest's ``answer_confidence``). Abstention by
confidence and when the LLM is asked are unit tests (``tests/unit/processors/cited_answer``).
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support.books import answer_search, search


def answer_of(client: httpx.Client, url: str, **config: Any) -> dict[str, Any]:
    result = search(client, url, answer_search(**{"prefer": "confident", **config}))
    assert sorted(h["_id"] for h in result["hits"]["hits"]) == ["author", "film", "novel"]  # abstaining hides no hit
    found: dict[str, Any] = result["ext"]["answerbox"]["answer"]
    return found


@pytest.mark.usefixtures("books")
def test_an_extractive_answer_carries_its_confidence_and_what_it_rests_on(answerbox: str, client: httpx.Client) -> None:
    answer = answer_of(client, answerbox, min_confidence=0)
    assert answer["mode"] == "extractive"
    assert not answer["abstained"]
    assert "Herbert" in answer["text"]
    assert 0 < answer["confidence"] < 1
    assert answer["reason"] is None
    assert answer["llm"] is None
    assert set(answer["signals"]) == {
        "score",
        "margin",
        "span_probability",
        "over_no_answer",
        "question_overlap",
        "rank",
        "words",
        "agreement",
        "covered_probability",
    }
    assert answer["signals"]["score"] == pytest.approx(answer["citations"][0]["support"], abs=1e-4)
