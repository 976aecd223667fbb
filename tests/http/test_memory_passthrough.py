"""Where the cluster runs ml-commons, its memory is the one used: the memory API passes through
untouched, and a search's ``memory_id`` is read and written there with the caller's own
credentials. A small stand-in for ml-commons' memory endpoints sits in front of osmem-server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from opensearchpy import OpenSearch
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.conftest import AnswerboxFactory, bulk_index
from tests.support.forwarding import forward
from tests.support.servers import serve

CALLER = {"authorization": "Bearer caller-token"}
PIPELINE = {
    "request_processors": [{"conversation": {"rewrite": "rules"}}],
    "response_processors": [{"cited_answer": {"mode": "extractive"}}],
}


@dataclass
class MlCommons:
    """The cluster's plugin list names ml-commons; its memory API keeps messages in a dict."""

    upstream: str
    seen: list[tuple[str, str, str | None]] = field(default_factory=list)  # (method, path and query, authorization)
    messages: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {"m1": []})

    async def _plugins(self, request: Request) -> Response:
        return JSONResponse([{"name": "node-1", "component": "opensearch-ml", "version": "3.0.0"}])

    async def _memory(self, request: Request) -> Response:
        self.seen.append(
            (request.method, f"{request.url.path}?{request.url.query}", request.headers.get("authorization"))
        )
        if request.method == "POST" and request.url.path == "/_plugins/_ml/memory":
            return JSONResponse({"memory_id": "m1"})
        memory_id = request.path_params.get("memory_id", "")
        if memory_id not in self.messages:
            return JSONResponse(
                {"error": {"root_cause": [], "type": "status_exception", "reason": "not found"}, "status": 404},
                status_code=404,
            )
        if request.method == "POST":
            message = {
                **json.loads(await request.body()),
                "memory_id": memory_id,
                "message_id": f"msg{len(self.messages[memory_id])}",
            }
            self.messages[memory_id].append(message)
            return JSONResponse({"message_id": message["message_id"]})
        return JSONResponse({"messages": self.messages[memory_id][::-1]})

    async def _rest(self, request: Request) -> Response:
        return await forward(self.upstream, request, await request.body(), timeout_s=30)

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/_cat/plugins", self._plugins, methods=["GET"]),
                Route("/_plugins/_ml/memory", self._memory, methods=["GET", "POST"]),
                Route("/_plugins/_ml/memory/{memory_id}/messages", self._memory, methods=["GET", "POST"]),
                Route("/{path:path}", self._rest, methods=["GET", "HEAD", "POST", "PUT", "DELETE"]),
            ]
        )


@pytest.fixture
def cluster(opensearch: OpenSearch, osmem_url: str) -> Iterator[tuple[MlCommons, str]]:
    bulk_index(
        opensearch, "books", [{"_id": "sb50", "text": "Super Bowl 50 was played at Levi's Stadium in Santa Clara."}]
    )
    ml = MlCommons(osmem_url)
    with serve(ml.app()) as url:
        yield ml, url


def test_the_memory_api_and_a_searchs_memory_go_to_ml_commons(
    cluster: tuple[MlCommons, str], make_answerbox: AnswerboxFactory, client: httpx.Client
) -> None:
    ml, cluster_url = cluster
    url = make_answerbox(opensearch={"url": cluster_url})
    created = client.post(f"{url}/_plugins/_ml/memory", json={"name": "chat"}, headers=CALLER)
    assert created.json() == {"memory_id": "m1"}
    assert ml.seen == [("POST", "/_plugins/_ml/memory?", "Bearer caller-token")]
    assert client.get(f"{url}/_plugins/_ml/memory/m1/messages", headers=CALLER).json() == {"messages": []}

    client.put(f"{url}/_search/pipeline/chat", json=PIPELINE).raise_for_status()
    for question in ("Who won Super Bowl 50?", "Where was it played?"):
        body = {
            "query": {"match": {"text": question}},
            "ext": {"generative_qa_parameters": {"memory_id": "m1", "message_size": 3}},
        }
        answer = client.post(f"{url}/books/_search", params={"search_pipeline": "chat"}, json=body, headers=CALLER)
        assert answer.status_code == 200, answer.text
    turn = answer.json()["ext"]["answerbox"]["conversation"]
    assert turn["standalone_question"] == "Where was Super Bowl 50 played?"
    assert turn["message_id"] == "msg1"
    assert [m["input"] for m in ml.messages["m1"]] == ["Who won Super Bowl 50?", "Where was it played?"]
    assert ml.messages["m1"][1]["origin"] == "answerbox"
    reads = [s for s in ml.seen if s[0] == "GET" and "max_results=3" in s[1]]
    assert len(reads) == 2
    assert all(auth == "Bearer caller-token" for *_, auth in ml.seen)
    # answerbox's own index was never used.
    assert httpx.head(f"{cluster_url}/.answerbox-memory").status_code == 404


def test_the_setting_keeps_memories_in_answerbox_whatever_the_cluster_runs(
    cluster: tuple[MlCommons, str], make_answerbox: AnswerboxFactory, client: httpx.Client
) -> None:
    ml, cluster_url = cluster
    url = make_answerbox(opensearch={"url": cluster_url}, memory={"backend": "answerbox"})
    created = client.post(f"{url}/_plugins/_ml/memory", json={"name": "chat"}).json()
    assert created["memory_id"] != "m1"
    assert ml.seen == []
    assert client.get(f"{url}/_plugins/_ml/memory/{created['memory_id']}").json()["name"] == "chat"
