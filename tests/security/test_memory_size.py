"""A memory's messages have a size limit: a message over it is refused when written, and one
stored before there was a limit (written straight into the store) neither stalls a later
follow-up's rules rewrite nor pushes the LLM's rewrite prompt past its limit. Over real HTTP
against osmem-server, with answerbox's own memory store."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from answerbox.memory.records import MAX_MESSAGE_CHARS
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index
from tests.support.lag import lag_of
from tests.support.scripted_llm import ScriptedLLM

MEMORY = "/_plugins/_ml/memory"
STORE = ".answerbox-memory"
# 2.6 MB of names: what the rules rewrite reads the earlier question for.
HUGE = "Who won Super Bowl 50? " + "The Denver Broncos met the Carolina Panthers in Santa Clara. " * 43_000
PIPELINE = {
    "request_processors": [{"conversation": {}}],
    "response_processors": [{"cited_answer": {"mode": "extractive", "size": 1}}],
}


@pytest.fixture
def books(opensearch: OpenSearch) -> None:
    bulk_index(opensearch, "books", [{"_id": "sb50", "text": "Super Bowl 50 was played at Levi's Stadium."}])


def _memory_with_an_oversized_turn(client: httpx.Client, url: str, opensearch: OpenSearch) -> str:
    client.put(f"{url}/_search/pipeline/chat", json=PIPELINE).raise_for_status()
    memory_id = str(client.post(f"{url}{MEMORY}", json={"name": "chat"}).json()["memory_id"])
    now = "2026-01-01T00:00:00.000000Z"
    opensearch.index(
        index=STORE,
        body={
            "kind": "message", "memory_id": memory_id, "user": None, "input": HUGE, "response": HUGE,
            "origin": "answerbox", "additional_info": {"standalone_question": HUGE}, "create_time": now,
            "updated_time": now, "order": time.time_ns(),
        },
        params={"refresh": "true"},
    )  # fmt: skip
    return memory_id


def _follow_up(client: httpx.Client, url: str, memory_id: str) -> httpx.Response:
    body = {
        "query": {"match": {"text": "Where was it played?"}},
        "ext": {"generative_qa_parameters": {"memory_id": memory_id}},
    }
    return client.post(f"{url}/books/_search", params={"search_pipeline": "chat"}, json=body)


def test_a_message_over_the_limit_is_refused(answerbox: str, client: httpx.Client) -> None:
    memory_id = client.post(f"{answerbox}{MEMORY}", json={"name": "chat"}).json()["memory_id"]
    messages = f"{answerbox}{MEMORY}/{memory_id}/messages"
    for body in (
        {"input": "x" * (MAX_MESSAGE_CHARS + 1)},
        {"response": HUGE},
        {"additional_info": {f"k{i}": "v" * 1000 for i in range(30)}},
    ):
        refused = client.post(messages, json=body)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["type"] == "illegal_argument_exception"
    assert client.get(messages).json() == {"messages": []}
    assert client.post(messages, json={"input": "x" * MAX_MESSAGE_CHARS}).status_code == 200


def test_an_oversized_earlier_turn_does_not_stall_the_rules_rewrite(
    books: None, answerbox: str, opensearch: OpenSearch, client: httpx.Client
) -> None:
    """The rules read the whole 2.6 MB earlier question: 3-5 s with every other request waiting."""
    memory_id = _memory_with_an_oversized_turn(client, answerbox, opensearch)
    with lag_of(answerbox) as lag:
        answer = _follow_up(client, answerbox, memory_id)
    assert answer.status_code == 200, answer.text
    turn = answer.json()["ext"]["answerbox"]["conversation"]
    assert (turn["method"], turn["standalone_question"]) == ("rules", "Where was Super Bowl 50 played?")
    assert lag.polls
    assert lag.longest_s < 0.2, lag.longest_s


def test_an_oversized_earlier_turn_does_not_break_the_llms_rewrite(
    books: None,
    make_answerbox: AnswerboxFactory,
    scripted_llm: tuple[ScriptedLLM, str],
    opensearch: OpenSearch,
    client: httpx.Client,
) -> None:
    """Its prompt rendered past the prompt limit: every later follow-up on the memory was a 400."""
    scripted, llm_url = scripted_llm
    scripted.replies = ["Where was Super Bowl 50 played?"]
    url = make_answerbox(llm={"base_url": llm_url})
    memory_id = _memory_with_an_oversized_turn(client, url, opensearch)
    answer = _follow_up(client, url, memory_id)
    assert answer.status_code == 200, answer.text
    turn: dict[str, Any] = answer.json()["ext"]["answerbox"]["conversation"]
    assert (turn["method"], turn["standalone_question"]) == ("llm", "Where was Super Bowl 50 played?")
    (prompt,) = (m["content"] for m in scripted.calls[-1]["messages"])
    assert len(prompt) < 5000
