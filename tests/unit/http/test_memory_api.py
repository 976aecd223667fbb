"""The memory API served by answerbox's own store, in-process over the fake cluster (no
ml-commons there, no security plugin), in the shapes of OpenSearch's documentation
(ml-commons-plugin/api/memory-apis/: create-memory, get-memory, update-memory, delete-memory,
create-message, get-message, get-message-traces)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.unit.asgi import in_process, opensearch_error
from tests.unit.fake_opensearch import FakeOpenSearch

MEMORY = "/_plugins/_ml/memory"
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z$")


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with in_process(cluster=FakeOpenSearch()) as client:
        yield client


async def _create(client: httpx.AsyncClient, name: str) -> str:
    created = await client.post(MEMORY, json={"name": name})
    assert created.status_code == 200, created.text
    assert list(created.json()) == ["memory_id"]
    return str(created.json()["memory_id"])


async def test_a_memory_is_created_read_listed_renamed_and_deleted(client: httpx.AsyncClient) -> None:
    first = await _create(client, "Conversation for a RAG pipeline")
    second = await _create(client, "another")

    memory = (await client.get(f"{MEMORY}/{first}")).json()
    assert set(memory) == {"memory_id", "create_time", "updated_time", "name", "user"}
    assert memory["memory_id"] == first
    assert memory["name"] == "Conversation for a RAG pipeline"
    assert memory["user"] is None  # no security plugin: no users, as in ml-commons
    assert TIME.match(memory["create_time"])
    assert TIME.match(memory["updated_time"])

    listed = (await client.get(MEMORY)).json()
    assert [m["memory_id"] for m in listed["memories"]] == [second, first]  # most recently updated first
    assert "next_token" not in listed
    page = (await client.get(MEMORY, params={"max_results": 1})).json()
    assert [m["memory_id"] for m in page["memories"]] == [second]
    assert page["next_token"] == 1
    rest = (await client.get(MEMORY, params={"max_results": 1, "next_token": 1})).json()
    assert [m["memory_id"] for m in rest["memories"]] == [first]
    assert "next_token" not in rest

    renamed = await client.put(f"{MEMORY}/{first}", json={"name": "renamed"})
    assert renamed.status_code == 200
    assert (renamed.json()["result"], renamed.json()["_id"]) == ("updated", first)
    assert (await client.get(f"{MEMORY}/{first}")).json()["name"] == "renamed"
    assert [m["memory_id"] for m in (await client.get(MEMORY)).json()["memories"]] == [first, second]

    (await client.post(f"{MEMORY}/{first}/messages", json={"input": "q", "response": "a"})).raise_for_status()
    assert (await client.delete(f"{MEMORY}/{first}")).json() == {"success": True}
    gone = await client.get(f"{MEMORY}/{first}")
    assert opensearch_error(gone, 404, "resource_not_found_exception") == f"Memory [{first}] not found"
    assert [m["memory_id"] for m in (await client.get(MEMORY)).json()["memories"]] == [second]


async def test_messages_are_added_read_paged_and_their_additional_info_updated(client: httpx.AsyncClient) -> None:
    memory_id = await _create(client, "chat")
    ids = []
    for n in range(3):
        body = {
            "input": f"question {n}",
            "prompt_template": "t",
            "response": f"answer {n}",
            "origin": "test",
            "additional_info": {"n": str(n)},
        }
        added = await client.post(f"{MEMORY}/{memory_id}/messages", json=body)
        assert added.status_code == 200
        assert list(added.json()) == ["message_id"]
        ids.append(added.json()["message_id"])

    message = (await client.get(f"{MEMORY}/message/{ids[0]}")).json()
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
    listed = (await client.get(f"{MEMORY}/{memory_id}/messages")).json()
    assert [m["message_id"] for m in listed["messages"]] == ids[::-1]  # newest first
    page = (await client.get(f"{MEMORY}/{memory_id}/messages", params={"max_results": 2, "next_token": 1})).json()
    assert [m["message_id"] for m in page["messages"]] == [ids[1], ids[0]]
    assert "next_token" not in page

    updated = await client.put(f"{MEMORY}/message/{ids[1]}", json={"additional_info": {"feedback": "thumbs up"}})
    assert updated.status_code == 200
    assert updated.json()["result"] == "updated"
    # Merged into what was there, as an update of a document merges.
    assert (await client.get(f"{MEMORY}/message/{ids[1]}")).json()["additional_info"] == {
        "n": "1",
        "feedback": "thumbs up",
    }
    # Only additional_info may change, as in ml-commons.
    refused = await client.put(f"{MEMORY}/message/{ids[1]}", json={"response": "rewritten"})
    assert "response" in opensearch_error(refused, 400, "illegal_argument_exception")
    assert (await client.get(f"{MEMORY}/message/{ids[1]}")).json()["response"] == "answer 1"


async def test_traces_belong_to_their_message_and_stay_out_of_the_conversation(client: httpx.AsyncClient) -> None:
    memory_id = await _create(client, "agent")
    parent = (
        await client.post(f"{MEMORY}/{memory_id}/messages", json={"input": "Which index has most documents"})
    ).json()["message_id"]
    for number in (2, 1):
        step = {"input": f"step {number}", "response": "done", "parent_message_id": parent, "trace_number": number}
        (await client.post(f"{MEMORY}/{memory_id}/messages", json=step)).raise_for_status()
    traces = (await client.get(f"{MEMORY}/message/{parent}/traces")).json()
    assert [(t["input"], t["trace_number"], t["parent_message_id"]) for t in traces["traces"]] == [
        ("step 1", 1, parent),
        ("step 2", 2, parent),
    ]
    assert [m["message_id"] for m in (await client.get(f"{MEMORY}/{memory_id}/messages")).json()["messages"]] == [
        parent
    ]
    # A trace's parent must be a message of the same memory.
    other = await _create(client, "other")
    stray = await client.post(
        f"{MEMORY}/{other}/messages", json={"input": "x", "parent_message_id": parent, "trace_number": 1}
    )
    reason = opensearch_error(stray, 404, "resource_not_found_exception")
    assert reason == f"Message [{parent}] not found in memory [{other}]"


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
async def test_what_does_not_exist_is_a_404_in_opensearchs_shape(
    client: httpx.AsyncClient, method: str, path: str, body: object
) -> None:
    await _create(client, "exists")  # the index exists: a missing document, not a missing index
    answer = await client.request(method, path, json=body)
    assert opensearch_error(answer, 404, "resource_not_found_exception").endswith(" [nope] not found")


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
async def test_bad_input_is_a_400_that_names_it_and_stores_nothing(
    client: httpx.AsyncClient, method: str, path: str, body: object, words: str
) -> None:
    memory_id = await _create(client, "kept")
    answer = await client.request(method, path.replace("ID", memory_id), json=body)
    assert words in opensearch_error(answer, 400, "illegal_argument_exception")
    assert [m["memory_id"] for m in (await client.get(MEMORY)).json()["memories"]] == [memory_id]
    assert (await client.get(f"{MEMORY}/{memory_id}/messages")).json() == {"messages": []}


async def test_a_body_not_declared_json_is_refused(client: httpx.AsyncClient) -> None:
    answer = await client.post(MEMORY, content=b'{"name": "x"}', headers={"content-type": "text/plain"})
    reason = opensearch_error(answer, 406, "illegal_argument_exception")
    assert reason == "Content-Type header [text/plain] is not supported: send application/json"
    assert (await client.get(MEMORY)).json() == {"memories": []}
