"""A memory is its creator's: with OpenSearch's security plugin on (a small proxy here), another
user's memory is a 404 on every endpoint and in a search's ``memory_id``, and every read and
write of answerbox's own memory store goes with the caller's credentials."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index
from tests.support.auth_proxy import AuthProxy, User, basic
from tests.support.servers import serve

MEMORY = "/_plugins/_ml/memory"
STORE = ".answerbox-memory"
ALICE, BOB, READER = basic("alice", "a"), basic("bob", "b"), basic("reader", "r")
PIPELINE = {
    "request_processors": [{"conversation": {"rewrite": "rules"}}],
    "response_processors": [{"cited_answer": {"mode": "extractive"}}],
}


@pytest.fixture
def secured(make_answerbox: AnswerboxFactory, opensearch: OpenSearch, osmem_url: str) -> Any:
    bulk_index(opensearch, "books", [{"_id": "dune", "body": "Spice is mined on Arrakis, the desert planet."}])
    users = {
        "alice": User("a", read=("books",), write=(STORE,)),
        "bob": User("b", read=("books",), write=(STORE,)),
        "reader": User("r", read=("books",)),
        "service": User("s", read=("*",), write=(STORE, ".answerbox-pipelines")),
    }
    proxy = AuthProxy(osmem_url, users)
    with serve(proxy.app()) as proxy_url:
        url = make_answerbox(opensearch={"url": proxy_url, "service_username": "service", "service_password": "s"})
        httpx.put(
            f"{url}/_search/pipeline/chat", json=PIPELINE, headers=basic("service", "s"), timeout=30
        ).raise_for_status()
        yield url, proxy


def test_another_users_memory_is_not_found_anywhere(secured: Any, client: httpx.Client) -> None:
    url, _ = secured
    memory_id = client.post(f"{url}{MEMORY}", json={"name": "alice's"}, headers=ALICE).json()["memory_id"]
    message_id = client.post(
        f"{url}{MEMORY}/{memory_id}/messages", json={"input": "q", "response": "a"}, headers=ALICE
    ).json()["message_id"]
    assert client.get(f"{url}{MEMORY}/{memory_id}", headers=ALICE).json()["user"] == "alice"

    for method, path, body in (
        ("GET", f"{MEMORY}/{memory_id}", None),
        ("PUT", f"{MEMORY}/{memory_id}", {"name": "bob's now"}),
        ("DELETE", f"{MEMORY}/{memory_id}", None),
        ("GET", f"{MEMORY}/{memory_id}/messages", None),
        ("POST", f"{MEMORY}/{memory_id}/messages", {"input": "injected"}),
        ("GET", f"{MEMORY}/message/{message_id}", None),
        ("PUT", f"{MEMORY}/message/{message_id}", {"additional_info": {"x": "y"}}),
        ("GET", f"{MEMORY}/message/{message_id}/traces", None),
    ):
        answer = client.request(method, f"{url}{path}", json=body, headers=BOB)
        assert answer.status_code == 404, (method, path, answer.text)
        assert answer.json()["error"]["type"] == "resource_not_found_exception"
    assert client.get(f"{url}{MEMORY}", headers=BOB).json() == {"memories": []}

    search = {
        "query": {"match": {"body": "where is it mined"}},
        "ext": {"generative_qa_parameters": {"memory_id": memory_id}},
    }
    answer = client.post(f"{url}/books/_search", params={"search_pipeline": "chat"}, json=search, headers=BOB)
    assert answer.status_code == 404
    assert answer.json()["error"]["type"] == "resource_not_found_exception"

    # Nothing of bob's reached alice's memory.
    kept = client.get(f"{url}{MEMORY}/{memory_id}", headers=ALICE).json()
    assert kept["name"] == "alice's"
    messages = client.get(f"{url}{MEMORY}/{memory_id}/messages", headers=ALICE).json()["messages"]
    assert [(m["input"], m["additional_info"]) for m in messages] == [("q", {})]


def test_the_store_is_written_with_the_callers_credentials(secured: Any, client: httpx.Client) -> None:
    url, proxy = secured
    memory_id = client.post(f"{url}{MEMORY}", json={"name": "alice's"}, headers=ALICE).json()["memory_id"]
    search = {"query": {"match": {"body": "spice"}}, "ext": {"generative_qa_parameters": {"memory_id": memory_id}}}
    answer = client.post(f"{url}/books/_search", params={"search_pipeline": "chat"}, json=search, headers=ALICE)
    assert answer.status_code == 200, answer.text
    assert answer.json()["ext"]["answerbox"]["conversation"]["message_id"]

    writes = [
        (user, method, path)
        for user, method, path in proxy.granted
        if path.startswith(f"/{STORE}/") and method != "GET"
    ]
    assert writes
    assert {user for user, _, _ in writes} == {"alice"}
    assert ("alice", "POST", f"/{STORE}/_doc") in writes  # the memory, then the turn
    # Only the index's creation used the service account.
    assert {(u, m) for u, m, p in proxy.granted if p.rstrip("/") == f"/{STORE}" and u == "service"} <= {
        ("service", "HEAD"),
        ("service", "PUT"),
    }


def test_a_caller_opensearch_does_not_let_write_the_store_is_refused(secured: Any, client: httpx.Client) -> None:
    url, proxy = secured
    refused = client.post(f"{url}{MEMORY}", json={"name": "mine"}, headers=READER)
    assert refused.status_code == 403
    assert refused.json()["error"]["type"] == "security_exception"
    assert ("reader", "POST", f"/{STORE}/_doc") in proxy.denied
    assert client.post(f"{url}{MEMORY}", json={"name": "anyone"}).status_code == 401
    assert client.get(f"{url}{MEMORY}").status_code == 401
