"""The memory API served by answerbox's own store over osmem-server (no ml-commons there), end
to end: a memory's life against a real index (its sorting and paging OpenSearch's own). The
API's every shape and error is told in-process (tests/unit/http/test_memory_api.py)."""

from __future__ import annotations

import re

import httpx

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
