"""The pipeline API reaches the cluster's own search pipelines too, as a search does: ``GET`` lists
them beside answerbox's (answerbox's shadowing one of the same id) and ``DELETE`` of an id answerbox
does not store deletes the cluster's, each with the caller's credentials. osmem-server has no
pipeline API, so a hop in front of it holds the cluster's pipelines, as OpenSearch would."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.conftest import AnswerboxFactory
from tests.support.forwarding import forward
from tests.support.servers import serve
from tests.unit.asgi import opensearch_error

NATIVE: dict[str, Any] = {"request_processors": [{"filter_query": {"query": {"term": {"level": "public"}}}}]}
MINE: dict[str, Any] = {"response_processors": [{"cited_answer": {}}]}
AUTH = {"authorization": "Basic YWxpY2U6czNjcjN0"}


def _error(status: int, error_type: str) -> JSONResponse:
    cause = {"type": error_type, "reason": "as OpenSearch says it"}
    return JSONResponse({"error": {"root_cause": [cause], **cause}, "status": status}, status)


@dataclass
class Cluster:
    """OpenSearch's pipeline API over a dict; every other request goes on to osmem-server."""

    upstream: str
    pipelines: dict[str, Any] = field(default_factory=lambda: {"native": NATIVE, "both": NATIVE})
    refuse: bool = False
    seen: list[str | None] = field(default_factory=list)
    putters: set[str | None] | None = None  # the credentials that may PUT (None: any)

    async def pipeline(self, request: Request) -> Response:
        self.seen.append(request.headers.get("authorization"))
        if self.refuse:
            return _error(403, "security_exception")
        if request.method == "PUT":
            if self.putters is not None and request.headers.get("authorization") not in self.putters:
                return _error(403, "security_exception")
            self.pipelines[request.path_params["id"]] = await request.json()
            return JSONResponse({"acknowledged": True})
        patterns = request.path_params.get("id", "*").split(",")
        named = [pid for pid in self.pipelines if any(fnmatchcase(pid, p) for p in patterns)]
        if request.method == "DELETE":
            if not named:
                return JSONResponse(
                    {"error": {"type": "resource_not_found_exception", "reason": "x"}, "status": 404}, 404
                )
            for pid in named:
                del self.pipelines[pid]
            return JSONResponse({"acknowledged": True})
        return JSONResponse({pid: self.pipelines[pid] for pid in named}, 200 if named else 404)

    async def other(self, request: Request) -> Response:
        return await forward(self.upstream, request, await request.body(), 5.0)

    def app(self) -> Starlette:
        methods = ["GET", "PUT", "DELETE"]
        return Starlette(
            routes=[
                Route("/_search/pipeline", self.pipeline, methods=methods),
                Route("/_search/pipeline/{id}", self.pipeline, methods=methods),
                Route("/{path:path}", self.other, methods=["GET", "HEAD", "POST", "PUT", "DELETE"]),
            ]
        )


@pytest.fixture
def cluster(make_answerbox: AnswerboxFactory, osmem_url: str, client: httpx.Client) -> Iterator[tuple[Cluster, str]]:
    held = Cluster(osmem_url)
    with serve(held.app()) as hop:
        url = make_answerbox(opensearch={"url": hop})
        for pid in ("mine", "both"):
            assert client.put(f"{url}/_search/pipeline/{pid}", json=MINE).status_code == 200
        held.seen.clear()
        yield held, url


def test_get_lists_the_cluster_s_pipelines_beside_answerbox_s(
    cluster: tuple[Cluster, str], client: httpx.Client
) -> None:
    held, url = cluster
    assert client.get(f"{url}/_search/pipeline", headers=AUTH).json() == {
        "native": NATIVE,
        "both": MINE,  # answerbox's shadows the cluster's, as for a search
        "mine": MINE,
    }
    assert client.get(f"{url}/_search/pipeline/native").json() == {"native": NATIVE}
    assert client.get(f"{url}/_search/pipeline/mine,native").json() == {"native": NATIVE, "mine": MINE}
    missing = client.get(f"{url}/_search/pipeline/missing")
    assert (missing.status_code, missing.json()) == (404, {})
    assert held.seen[0] == AUTH["authorization"]  # the caller's own credentials


def test_a_cluster_that_refuses_shows_answerbox_s_own(cluster: tuple[Cluster, str], client: httpx.Client) -> None:
    held, url = cluster
    held.refuse = True
    assert client.get(f"{url}/_search/pipeline").json() == {"both": MINE, "mine": MINE}
    assert client.get(f"{url}/_search/pipeline/native").status_code == 404


def test_delete_of_an_id_answerbox_does_not_store_deletes_the_cluster_s(
    cluster: tuple[Cluster, str], client: httpx.Client
) -> None:
    held, url = cluster
    assert client.delete(f"{url}/_search/pipeline/native", headers=AUTH).json() == {"acknowledged": True}
    assert "native" not in held.pipelines
    assert held.seen[-1] == AUTH["authorization"]
    assert client.delete(f"{url}/_search/pipeline/both").json() == {"acknowledged": True}
    assert "both" in held.pipelines  # answerbox's was deleted, the cluster's left
    opensearch_error(client.delete(f"{url}/_search/pipeline/native"), 404, "resource_not_found_exception")
    held.refuse = True
    opensearch_error(client.delete(f"{url}/_search/pipeline/both"), 403, "security_exception")


def test_a_put_that_would_shadow_the_cluster_s_pipeline_needs_the_right_to_put_the_cluster_s(
    cluster: tuple[Cluster, str], client: httpx.Client
) -> None:
    """A stored answerbox pipeline runs in place of the cluster's of the same id for every search
    of it: any caller who may write answerbox's index could replace an index default holding a
    filter_query. Now only a caller who may also put the cluster's pipelines may store it."""
    held, url = cluster
    held.putters = {AUTH["authorization"]}
    reason = opensearch_error(client.put(f"{url}/_search/pipeline/native", json=MINE), 403, "security_exception")
    assert reason.startswith("pipeline [native] would shadow the cluster's search pipeline of the same id"), reason
    assert client.get(f"{url}/_search/pipeline/native").json() == {"native": NATIVE}
    # An id the cluster does not hold is stored as before.
    assert client.put(f"{url}/_search/pipeline/fresh", json=MINE).status_code == 200
    # A caller who may put the cluster's pipelines may shadow one; the cluster's stays as it was.
    assert client.put(f"{url}/_search/pipeline/native", json=MINE, headers=AUTH).status_code == 200
    assert held.pipelines["native"] == NATIVE
    assert client.get(f"{url}/_search/pipeline/native").json() == {"native": MINE}
    # Where the cluster will not tell the caller whether it holds one: refused.
    held.refuse = True
    reason = opensearch_error(client.put(f"{url}/_search/pipeline/other", json=MINE), 403, "security_exception")
    assert "may not read the cluster's search pipelines" in reason
