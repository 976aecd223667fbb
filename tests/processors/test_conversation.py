"""Follow-up questions: a search with ``memory_id`` is read against the memory's earlier turns
(the ``conversation`` processor makes it standalone, by the LLM or by the rules) and stored
there after its answer, over real HTTP against osmem-server. How the processor rewrites (the
LLM's prompt, its fallbacks to the rules, where a pipeline may hold it) is unit-tested in
``tests/unit/processors/conversation``."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index, completions
from tests.support.recording_proxy import RecordingProxy

MEMORY = "/_plugins/_ml/memory"
DOCS = [
    {
        "_id": "sb50",
        "title": "Super Bowl 50",
        "text": "Super Bowl 50 was an American football game. The Denver Broncos defeated the Carolina Panthers 24-10. "
        "The game was played on February 7, 2016, at Levi's Stadium in Santa Clara, California.",
    },
    {
        "_id": "theatre",
        "title": "Theatre",
        "text": "Where a play was played first matters to historians of the theatre.",
    },
    {"_id": "normans", "title": "Normans", "text": "The Normans gave their name to Normandy, a region in France."},
]
RULES = {
    "request_processors": [{"conversation": {"rewrite": "rules"}}],
    "response_processors": [{"cited_answer": {"mode": "extractive", "size": 3}}],
}
LLM = {
    "request_processors": [{"conversation": {}}],
    "response_processors": [{"cited_answer": {"mode": "extractive", "size": 3}}],
}
# No conversation processor of its own: a search with a memory gets one with the defaults.
PLAIN = {"response_processors": [{"cited_answer": {"mode": "extractive", "size": 3}}]}


@pytest.fixture
def books(opensearch: OpenSearch) -> str:
    bulk_index(opensearch, "books", [dict(d) for d in DOCS])
    return "books"


def _setup(client: httpx.Client, url: str, pipelines: dict[str, Any]) -> str:
    for name, pipeline in pipelines.items():
        client.put(f"{url}/_search/pipeline/{name}", json=pipeline).raise_for_status()
    return str(client.post(f"{url}{MEMORY}", json={"name": "chat"}).json()["memory_id"])


def _ask(
    client: httpx.Client, url: str, question: str, pipeline: str, memory_id: str | None = None, **qa: Any
) -> httpx.Response:
    body: dict[str, Any] = {"query": {"match": {"text": question}}, "size": 3}
    if memory_id is not None:
        body["ext"] = {"generative_qa_parameters": {"memory_id": memory_id, **qa}}
    return client.post(f"{url}/books/_search", params={"search_pipeline": pipeline}, json=body)


def _ids(answer: httpx.Response) -> list[str]:
    return [hit["_id"] for hit in answer.json()["hits"]["hits"]]


def test_a_follow_up_finds_what_the_conversation_is_about_by_the_rules(
    books: str, answerbox: str, client: httpx.Client
) -> None:
    memory_id = _setup(client, answerbox, {"rules": RULES})
    first = _ask(client, answerbox, "Who won Super Bowl 50?", "rules", memory_id)
    assert first.status_code == 200, first.text
    turn = first.json()["ext"]["answerbox"]["conversation"]
    assert turn["history"] == 0
    assert turn["method"] == "none"
    assert turn["standalone_question"] == "Who won Super Bowl 50?"
    assert first.json()["ext"]["retrieval_augmented_generation"]["message_id"] == turn["message_id"]

    alone = _ask(client, answerbox, "Where was it played?", "rules")
    assert _ids(alone)[0] == "theatre"
    assert alone.json()["ext"]["answerbox"]["conversation"] is None
    follow_up = _ask(client, answerbox, "Where was it played?", "rules", memory_id)
    turn = follow_up.json()["ext"]["answerbox"]["conversation"]
    assert turn["method"] == "rules"
    assert turn["history"] == 1
    assert turn["question"] == "Where was it played?"
    assert turn["standalone_question"] == "Where was Super Bowl 50 played?"
    assert _ids(follow_up)[0] == "sb50"
    answer = follow_up.json()["ext"]["answerbox"]["answer"]
    # From the sentence that says where it was played, whichever span of it the reader takes.
    assert (answer["candidate"] or answer)["text"] in "at Levi's Stadium in Santa Clara, California."

    stored = client.get(f"{answerbox}{MEMORY}/{memory_id}/messages").json()["messages"]
    assert [m["input"] for m in stored] == ["Where was it played?", "Who won Super Bowl 50?"]
    latest = stored[0]
    assert latest["message_id"] == turn["message_id"]
    assert latest["origin"] == "answerbox"
    assert latest["additional_info"]["standalone_question"] == "Where was Super Bowl 50 played?"
    assert latest["additional_info"]["rewrite"] == "rules"
    assert latest["additional_info"]["abstained"] == json.dumps(answer["abstained"])
    if not answer["abstained"]:
        assert latest["response"] == answer["text"]
        cited = json.loads(latest["additional_info"]["citations"])
        assert cited
        assert {c["_index"] for c in cited} == {"books"}
        assert {c["_id"] for c in cited} <= {"sb50"}
        assert all(set(c) == {"_index", "_id", "field", "start", "end"} for c in cited)


def test_an_abstention_is_stored_as_one(books: str, answerbox: str, client: httpx.Client) -> None:
    strict = {"response_processors": [{"cited_answer": {"mode": "extractive", "min_confidence": 1.0}}]}
    memory_id = _setup(client, answerbox, {"strict": strict})
    answer = _ask(client, answerbox, "Who won Super Bowl 50?", "strict", memory_id).json()["ext"]["answerbox"]
    assert answer["answer"]["abstained"]
    assert answer["conversation"]["message_id"]
    stored = client.get(f"{answerbox}{MEMORY}/message/{answer['conversation']['message_id']}").json()
    assert stored["response"] == ""
    assert stored["additional_info"]["abstained"] == "true"
    assert stored["additional_info"]["reason"] == answer["answer"]["reason"]
    assert json.loads(stored["additional_info"]["citations"]) == []


def test_every_pipeline_takes_a_memory_and_the_defaults_rewrite_without_an_llm(
    books: str, answerbox: str, client: httpx.Client
) -> None:
    memory_id = _setup(client, answerbox, {"plain": PLAIN})
    _ask(client, answerbox, "Who won Super Bowl 50?", "plain", memory_id).raise_for_status()
    follow_up = _ask(client, answerbox, "Where was it played?", "plain", memory_id).json()
    assert follow_up["ext"]["answerbox"]["conversation"]["method"] == "rules"  # no LLM configured
    assert follow_up["hits"]["hits"][0]["_id"] == "sb50"
    # Without a memory the same pipeline runs as it did: no conversation processor at all.
    alone = _ask(client, answerbox, "Where was it played?", "plain").json()["ext"]["answerbox"]
    assert alone["conversation"] is None
    assert "conversation" not in alone["timings_ms"]


@pytest.mark.parametrize(
    ("qa", "status", "words"),
    [
        ({"memory_id": "no-such-memory"}, 404, "Memory [no-such-memory] not found"),
        ({"message_size": 51}, 400, "limits.max_message_size"),
        ({"memory_id": "a\u0000b"}, 400, "printable"),
        ({"llm_response_field": "text"}, 400, "retrieval_augmented_generation"),
    ],
)
def test_bad_memory_parameters_fail_the_search_and_store_nothing(
    books: str, answerbox: str, client: httpx.Client, qa: dict[str, Any], status: int, words: str
) -> None:
    memory_id = _setup(client, answerbox, {"rules": RULES})
    body = {
        "query": {"match": {"text": "Super Bowl"}},
        "ext": {"generative_qa_parameters": {"memory_id": memory_id, **qa}},
    }
    answer = client.post(f"{answerbox}/books/_search", params={"search_pipeline": "rules"}, json=body)
    assert answer.status_code == status, answer.text
    assert words in answer.json()["error"]["reason"], answer.text
    assert client.get(f"{answerbox}{MEMORY}/{memory_id}/messages").json() == {"messages": []}


def test_the_stream_takes_a_memory_and_ends_with_the_stored_turn(
    books: str, answerbox: str, client: httpx.Client
) -> None:
    memory_id = _setup(client, answerbox, {"rules": RULES})
    _ask(client, answerbox, "Who won Super Bowl 50?", "rules", memory_id).raise_for_status()
    body = {
        "query": {"match": {"text": "Where was it played?"}},
        "size": 3,
        "ext": {"generative_qa_parameters": {"memory_id": memory_id}},
    }
    with client.stream(
        "POST", f"{answerbox}/books/_answerbox/stream", params={"search_pipeline": "rules"}, json=body
    ) as stream:
        events = [line.removeprefix("event: ") for line in stream.iter_lines() if line.startswith("event: ")]
        assert stream.status_code == 200
    assert events[0] == "search"
    assert events[-2:] == ["answer", "done"]
    stored = client.get(f"{answerbox}{MEMORY}/{memory_id}/messages").json()["messages"]
    assert [m["input"] for m in stored] == ["Where was it played?", "Who won Super Bowl 50?"]
    assert stored[0]["additional_info"]["standalone_question"] == "Where was Super Bowl 50 played?"


@pytest.mark.real_llm
def test_the_real_llm_rewrites_or_the_rules_do(
    books: str, make_answerbox: AnswerboxFactory, real_llm: tuple[RecordingProxy, str], client: httpx.Client
) -> None:
    recorder, llm_url = real_llm
    url = make_answerbox(llm={"base_url": llm_url})
    memory_id = _setup(client, url, {"llm": LLM})
    _ask(client, url, "Who won Super Bowl 50?", "llm", memory_id).raise_for_status()
    follow_up = _ask(client, url, "Where was it played?", "llm", memory_id)
    assert follow_up.status_code == 200, follow_up.text
    turn = follow_up.json()["ext"]["answerbox"]["conversation"]
    # The protocol, never the wording: the call reached the LLM, and what it wrote is used only
    # when it is about this follow-up and names its subject.
    (_call,) = [
        c for c in completions(recorder) if "Last question: Where was it played?" in c["messages"][0]["content"]
    ]
    assert turn["method"] in ("llm", "rules")
    if turn["method"] == "llm":
        assert "super bowl 50" in turn["standalone_question"].lower()
    assert turn["message_id"]
    assert follow_up.json()["hits"]["hits"]
