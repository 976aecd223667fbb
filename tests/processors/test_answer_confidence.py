"""answer.confidence, abstention by it, and the LLM only where it pays, over real HTTP.

answerbox runs in front of osmem-server with the shipped ONNX reader/evaluator and its
calibrator (the manifest's ``answer_confidence``); the LLM is a scripted server that counts
its calls, so "the LLM was not asked" is checked, not assumed.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from opensearchpy import OpenSearch

from tests.conftest import bulk_index
from tests.processors.test_cited_answer import answer_search, books, generative, search  # noqa: F401 - fixtures
from tests.support.scripted_llm import ScriptedLLM

GENERATED = "Frank Herbert wrote Dune [2]."


@pytest.fixture
def scripted(generative: tuple[ScriptedLLM, str]) -> tuple[ScriptedLLM, str]:  # noqa: F811
    llm, url = generative
    llm.replies = [GENERATED]
    return llm, url


def answer_of(client: httpx.Client, url: str, **config: Any) -> dict[str, Any]:
    result = search(client, url, answer_search(**{"prefer": "confident", **config}))
    assert sorted(h["_id"] for h in result["hits"]["hits"]) == ["author", "film", "novel"]  # abstaining hides no hit
    found: dict[str, Any] = result["ext"]["answerbox"]["answer"]
    return found


def test_an_extractive_answer_carries_its_confidence_and_what_it_rests_on(
    books: OpenSearch, answerbox: str, client: httpx.Client  # noqa: F811
) -> None:
    answer = answer_of(client, answerbox, min_confidence=0)
    assert answer["mode"] == "extractive"
    assert not answer["abstained"]
    assert "Herbert" in answer["text"]
    assert 0 < answer["confidence"] < 1
    assert answer["reason"] is None
    assert answer["llm"] is None
    assert set(answer["signals"]) == {"score", "margin", "span_probability", "rank", "words", "agreement"}
    assert answer["signals"]["score"] == pytest.approx(answer["citations"][0]["support"], abs=1e-4)


def test_below_min_confidence_the_answer_becomes_the_candidate(
    books: OpenSearch, answerbox: str, client: httpx.Client  # noqa: F811
) -> None:
    shown = answer_of(client, answerbox, min_confidence=0)
    held = answer_of(client, answerbox, min_confidence=min(1.0, shown["confidence"] + 0.0001))
    assert held["abstained"]
    assert held["reason"] == "low_confidence"
    assert held["confidence"] is None
    assert held["candidate"] == {
        "text": shown["text"],
        "citations": shown["citations"],
        "mode": "extractive",
        "confidence": shown["confidence"],
    }
    # At exactly its confidence it is answered: the threshold is inclusive.
    assert not answer_of(client, answerbox, min_confidence=shown["confidence"])["abstained"]


def test_every_abstention_says_why(
    opensearch: OpenSearch, books: OpenSearch, answerbox: str, client: httpx.Client  # noqa: F811
) -> None:
    bulk_index(opensearch, "empty", [{"_id": "x", "text": "Nothing about novels here."}])
    none = search(client, answerbox, answer_search("zebra crossing"), index="empty")["ext"]["answerbox"]["answer"]
    assert none["abstained"]
    assert none["reason"] == "no_evidence"
    assert none["candidate"] is None
    body = answer_search()
    # CRAG judges every hit below its lower threshold: incorrect, no strip kept, no evidence.
    body["search_pipeline"]["response_processors"].insert(
        0, {"retrieval_evaluator": {"lower": 0.99, "upper": 0.999, "corrective": None}}
    )
    incorrect = search(client, answerbox, body)["ext"]["answerbox"]
    assert incorrect["retrieval"]["verdict"] == "incorrect"
    assert incorrect["answer"]["abstained"]
    assert incorrect["answer"]["reason"] == "retrieval_incorrect"


def test_a_confident_snippet_skips_the_llm(scripted: tuple[ScriptedLLM, str], client: httpx.Client) -> None:
    llm, url = scripted
    answer = answer_of(client, url, skip_llm_above=0, min_confidence=0)
    assert llm.calls == []
    assert answer["llm"] == "skipped"
    assert answer["mode"] == "extractive"
    asked = answer_of(client, url, skip_llm_above=1, min_confidence=0)
    assert len(llm.calls) == 1
    assert asked["llm"] == "used"
    # The LLM's held-up answer replaces the snippet only when it is more confident.
    assert asked["mode"] == ("generative" if asked["confidence"] > answer["confidence"] else "extractive")


def test_prefer_generative_keeps_the_llms_held_up_answer(
    scripted: tuple[ScriptedLLM, str], client: httpx.Client
) -> None:
    llm, url = scripted
    answer = answer_of(client, url, prefer="generative")
    assert len(llm.calls) == 1
    assert answer["mode"] == "generative"
    assert answer["llm"] == "used"
    assert answer["text"] == GENERATED
    assert 0 < answer["confidence"] < 1
    assert set(answer["signals"]) == {"support", "snippet_confidence", "agrees"}
    assert answer["signals"]["agrees"] == (
        "herbert" in answer_of(client, url, mode="extractive", min_confidence=0)["text"].lower()
    )


def test_a_failed_llm_leaves_the_snippet_and_says_so(scripted: tuple[ScriptedLLM, str], client: httpx.Client) -> None:
    llm, url = scripted
    llm.fail = True
    answer = answer_of(client, url, skip_llm_above=1, min_confidence=0)
    assert answer["mode"] == "extractive"
    assert answer["llm"] == "failed"
    assert "Herbert" in answer["text"]


def test_generative_mode_abstains_as_unsupported_when_no_claim_holds_up(
    scripted: tuple[ScriptedLLM, str], client: httpx.Client
) -> None:
    llm, url = scripted
    llm.replies = ["The moon is made of cheese [1]."]
    answer = answer_of(client, url, mode="generative", min_confidence=0)
    assert answer["abstained"]
    assert answer["reason"] == "unsupported"
    assert answer["llm"] == "used"
    assert [f["reason"] for f in answer["flagged"]] == ["unsupported"]


def test_a_confident_reader_spares_the_chain_its_llm(scripted: tuple[ScriptedLLM, str], client: httpx.Client) -> None:
    llm, url = scripted
    body = answer_search(skip_llm_above=0, prefer="confident")
    body["search_pipeline"]["response_processors"].insert(0, {"chain_of_query": {"skip_llm_above": 0}})
    report = search(client, url, body)["ext"]["answerbox"]
    assert llm.calls == []
    assert report["llm_skipped"] == ["chain_of_query"]
    assert report["chain"] is None
    assert report["answer"]["llm"] == "skipped"
    assert "Herbert" in report["answer"]["text"]
    body["search_pipeline"]["response_processors"][0] = {"chain_of_query": {"skip_llm_above": 1, "r_max": 1}}
    asked = search(client, url, body)["ext"]["answerbox"]
    assert asked["llm_skipped"] == []
    assert asked["chain"] is not None
    assert llm.calls


def test_the_thresholds_are_validated(books: OpenSearch, answerbox: str, client: httpx.Client) -> None:  # noqa: F811
    response = client.post(f"{answerbox}/books/_search", json=answer_search(min_confidence=1.5))
    assert response.status_code == 400
    assert response.json()["error"]["type"] in {"illegal_argument_exception", "x_content_parse_exception"}
    assert "min_confidence" in response.text
