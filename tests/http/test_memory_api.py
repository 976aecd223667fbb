"""The memory API served by answerbox's own store over osmem-server (no ml-commons there), in the
shapes of OpenSearch's documentation (ml-commons-plugin/api/memory-apis/: create-memory,
get-memory, update-memory, delete-memory, create-message, get-message, get-message-traces)."""

from __future__ import annotations

import re

import httpx
import pytest

MEMORY = "/_plugins/_ml/memory"
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z$")


def _create(client: httpx.Client, url: str, name: str) -> str:
    created = client.post(f"{url}{MEMORY}", json={"name": name})
    assert created.status_code == 200, created.text
    assert list(created.json()) == ["memory_id"]
    return str(created.json()["memory_id"])


def test_a_memory_is_created_read_listed_renamed_and_deleted(answerbox: str, client: httpx.Client) -> None:
    first = _create(client, answerbox, "Conversation for a RAG pipeline")
    second = _create(client, answerbox, "another")

    memory = client.get(f"{answerbox}{MEMORY}/{first}").json()
    assert set(memory) == {"memory_id", "create_time", "updated_time", "name", "user"}
    assert memory["memory_id"] == first
    assert memory["name"] == "Conversation for a RAG pipeline"
    assert memory["user"] is None  # no security plugin: no users, as in ml-commons
    assert TIME.match(memory["create_time"])
    assert TIME.match(memory["updated_time"])

    listed = client.get(f"{answerbox}{MEMORY}").json()
    assert [m["memory_id"] for m in listed["memories"]] == [second, first]  # most recently updated first
    assert "next_token" not in listed
    page = client.get(f"{answerbox}{MEMORY}", params={"max_results": 1}).json()
    assert [m["memory_id"] for m in page["memories"]] == [second]
    assert page["next_token"] == 1
    rest = client.get(f"{answerbox}{MEMORY}", params={"max_results": 1, "next_token": 1}).json()
    assert [m["memory_id"] for m in rest["memories"]] == [first]
    assert "next_token" not in rest

    renamed = client.put(f"{answerbox}{MEMORY}/{first}", json={"name": "renamed"})
    assert renamed.status_code == 200
    assert renamed.json()["result"] == "updated"
    assert renamed.json()["_id"] == first
    assert client.get(f"{answerbox}{MEMORY}/{first}").json()["name"] == "renamed"
    assert [m["memory_id"] for m in client.get(f"{answerbox}{MEMORY}").json()["memories"]] == [first, second]

    client.post(f"{answerbox}{MEMORY}/{first}/messages", json={"input": "q", "response": "a"}).raise_for_status()
    assert client.delete(f"{answerbox}{MEMORY}/{first}").json() == {"success": True}
    gone = client.get(f"{answerbox}{MEMORY}/{first}")
    assert gone.status_code == 404
    assert gone.json()["error"]["root_cause"][0]["type"] == "resource_not_found_exception"
    assert gone.json()["status"] == 404
    assert first in gone.json()["error"]["reason"]
    assert [m["memory_id"] for m in client.get(f"{answerbox}{MEMORY}").json()["memories"]] == [second]


def test_messages_are_added_read_paged_and_their_additional_info_updated(answerbox: str, client: httpx.Client) -> None:
    memory_id = _create(client, answerbox, "chat")
    ids = []
    for n in range(3):
        body = {
            "input": f"question {n}",
            "prompt_template": "t",
            "response": f"answer {n}",
            "origin": "test",
            "additional_info": {"n": str(n)},
        }
        added = client.post(f"{answerbox}{MEMORY}/{memory_id}/messages", json=body)
        assert added.status_code == 200
        assert list(added.json()) == ["message_id"]
        ids.append(added.json()["message_id"])

    message = client.get(f"{answerbox}{MEMORY}/message/{ids[0]}").json()
    assert message == {
        "memory_id": memory_id,
        "message_id": ids[0],
        "create_time": message["create_time"],
        "updated_time": message["updated_time"],
        "input": "question 0",
        "prompt_template": "t",
        "response": "answer 0",
        "origin": "test",
        "additional_info": {"n": "0"},
        "parent_message_id": None,
        "trace_number": None,
    }
    listed = client.get(f"{answerbox}{MEMORY}/{memory_id}/messages").json()
    assert [m["message_id"] for m in listed["messages"]] == ids[::-1]  # newest first
    page = client.get(f"{answerbox}{MEMORY}/{memory_id}/messages", params={"max_results": 2, "next_token": 1}).json()
    assert [m["message_id"] for m in page["messages"]] == [ids[1], ids[0]]
    assert "next_token" not in page

    updated = client.put(f"{answerbox}{MEMORY}/message/{ids[1]}", json={"additional_info": {"feedback": "thumbs up"}})
    assert updated.status_code == 200
    assert updated.json()["result"] == "updated"
    # Merged into what was there, as an update of a document merges.
    assert client.get(f"{answerbox}{MEMORY}/message/{ids[1]}").json()["additional_info"] == {
        "n": "1",
        "feedback": "thumbs up",
    }
    # Only additional_info may change, as in ml-commons.
    refused = client.put(f"{answerbox}{MEMORY}/message/{ids[1]}", json={"response": "rewritten"})
    assert refused.status_code == 400
    assert refused.json()["error"]["type"] == "illegal_argument_exception"
    assert client.get(f"{answerbox}{MEMORY}/message/{ids[1]}").json()["response"] == "answer 1"


def test_traces_belong_to_their_message_and_stay_out_of_the_conversation(answerbox: str, client: httpx.Client) -> None:
    memory_id = _create(client, answerbox, "agent")
    parent = client.post(
        f"{answerbox}{MEMORY}/{memory_id}/messages", json={"input": "Which index has most documents"}
    ).json()["message_id"]
    for number in (2, 1):
        step = {"input": f"step {number}", "response": "done", "parent_message_id": parent, "trace_number": number}
        client.post(f"{answerbox}{MEMORY}/{memory_id}/messages", json=step).raise_for_status()
    traces = client.get(f"{answerbox}{MEMORY}/message/{parent}/traces").json()
    assert [(t["input"], t["trace_number"], t["parent_message_id"]) for t in traces["traces"]] == [
        ("step 1", 1, parent),
        ("step 2", 2, parent),
    ]
    assert [m["message_id"] for m in client.get(f"{answerbox}{MEMORY}/{memory_id}/messages").json()["messages"]] == [
        parent
    ]
    # A trace's parent must be a message of the same memory.
    other = _create(client, answerbox, "other")
    stray = client.post(
        f"{answerbox}{MEMORY}/{other}/messages", json={"input": "x", "parent_message_id": parent, "trace_number": 1}
    )
    assert stray.status_code == 404


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", f"{MEMORY}/nope", None),
        ("PUT", f"{MEMORY}/nope", {"name": "x"}),
        ("DELETE", f"{MEMORY}/nope", None),
        ("GET", f"{MEMORY}/nope/messages", None),
        ("POST", f"{MEMORY}/nope/messages", {"input": "q"}),
        ("GET", f"{MEMORY}/message/nope", None),
        ("PUT", f"{MEMORY}/message/nope", {"additional_info": {}}),
        ("GET", f"{MEMORY}/message/nope/traces", None),
    ],
)
def test_what_does_not_exist_is_a_404_in_opensearchs_shape(
    answerbox: str, client: httpx.Client, method: str, path: str, body: object
) -> None:
    _create(client, answerbox, "exists")  # the index exists: a missing document, not a missing index
    answer = client.request(method, f"{answerbox}{path}", json=body)
    assert answer.status_code == 404, answer.text
    error = answer.json()
    assert error["status"] == 404
    assert error["error"]["type"] == "resource_not_found_exception"
    assert error["error"]["root_cause"][0]["reason"].endswith("[nope] not found")


@pytest.mark.parametrize(
    ("method", "path", "body", "words"),
    [
        ("POST", MEMORY, {"name": "x", "owner": "me"}, "owner"),
        ("POST", f"{MEMORY}/ID/messages", {"input": "q", "additional_info": {"n": 1}}, "additional_info.n"),
        ("POST", f"{MEMORY}/ID/messages", {"input": "q", "trace_number": -1}, "trace_number"),
        ("GET", f"{MEMORY}?max_results=0", None, "max_results"),
        ("GET", f"{MEMORY}?next_token=x", None, "next_token"),
        ("POST", f"{MEMORY}/_search", {"query": {"match_all": {}}}, "_search"),
    ],
)
def test_bad_input_is_a_400_that_names_it_and_stores_nothing(
    answerbox: str, client: httpx.Client, method: str, path: str, body: object, words: str
) -> None:
    memory_id = _create(client, answerbox, "kept")
    answer = client.request(method, f"{answerbox}{path.replace('ID', memory_id)}", json=body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["status"] == 400
    assert words in answer.json()["error"]["reason"]
    assert [m["memory_id"] for m in client.get(f"{answerbox}{MEMORY}").json()["memories"]] == [memory_id]
    assert client.get(f"{answerbox}{MEMORY}/{memory_id}/messages").json() == {"messages": []}


def test_a_body_not_declared_json_is_refused(answerbox: str, client: httpx.Client) -> None:
    answer = client.post(f"{answerbox}{MEMORY}", content=b'{"name": "x"}', headers={"content-type": "text/plain"})
    assert answer.status_code == 406
