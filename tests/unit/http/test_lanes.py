"""The fast lanes: each takes exactly the requests its route would (the ``_search`` routes; the
passthrough's catch-all), answers them without Starlette's router, and hands everything else to
the routes. That a search naming its pipeline (by body, parameter or the index's default) runs it
is tests/unit/pipeline/test_pipeline_selection.py's, since every ``_search`` there passes the lane."""

from __future__ import annotations

import json
import re

import pytest
from answerbox import app as answerbox_app
from answerbox.http import lanes
from starlette.routing import BaseRoute, Match, Mount, Route, Router
from starlette.types import Receive, Scope, Send

from tests.support.processors import DOCS, QUERY, registry_with_test_processors
from tests.unit.asgi import in_process, opensearch_error
from tests.unit.fake_opensearch import FakeOpenSearch


def _scope(method: str, path: str) -> Scope:
    return {"type": "http", "method": method, "path": path, "root_path": "", "headers": []}


def _lanes(routes: list[BaseRoute] = answerbox_app._ROUTES) -> lanes.FastLanes:
    async def unused(*args: object) -> None:
        raise AssertionError("called")

    shapes = lanes.RouteShapes.of(routes)
    return lanes.FastLanes(unused, shapes=shapes, search_of=unused, passthrough_of=unused, on_error=unused)  # type: ignore[arg-type]


def _routed_to(scope: Scope) -> object:
    """The endpoint (or app) Starlette's router sends ``scope`` to: the first route that matches it fully."""
    for route in answerbox_app._ROUTES:
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return getattr(route, "endpoint", route)
    return None


@pytest.mark.parametrize(
    ("method", "path", "target"),
    [
        ("POST", "/_search", ("/_search", "")),
        ("GET", "/_search", ("/_search", "")),
        ("POST", "/books/_search", ("/_search", "books")),
        ("GET", "/books,films/_search", ("/_search", "books,films")),
        ("POST", "/_all/_search", ("/_search", "_all")),
        ("POST", "/_msearch", ("/_msearch", "")),
        ("GET", "/books/_msearch", ("/_msearch", "books")),
        ("PUT", "/books/_search", None),
        ("HEAD", "/books/_search", None),  # the route's own way
        ("HEAD", "/_msearch", None),
        ("POST", "/books/_doc/_search", None),
        ("POST", "/books/_doc/_msearch", None),
        ("POST", "//_search", None),
        ("POST", "//_msearch", None),
        ("POST", "/_search/pipeline", None),
        ("GET", "/_search/pipeline/_search", None),
        ("POST", "/books/_search_shards", None),
        ("POST", "/books/_msearch/template", None),
        ("POST", "/books/_answerbox/stream", None),
        ("GET", "/_search/scroll", None),
    ],
)
def test_the_search_lane_takes_only_what_the_search_routes_take(
    method: str, path: str, target: tuple[str, str] | None
) -> None:
    scope = _scope(method, path)
    assert lanes._search_target(scope) == target
    endpoints = {"/_search": answerbox_app._search, "/_msearch": answerbox_app._msearch}
    if target is not None:
        assert _routed_to(scope) is endpoints[target[0]]
    elif method != "HEAD":
        assert _routed_to(scope) not in endpoints.values()


@pytest.mark.parametrize(
    ("method", "path", "own"),
    [
        ("GET", "/", True),
        ("POST", "/_bulk", True),
        ("GET", "/books/_doc/1", True),
        ("HEAD", "/books", True),
        ("DELETE", "/books", True),
        ("GET", "/_cat/indices", True),
        ("PATCH", "/books/_settings", True),
        ("OPTIONS", "/", True),
        ("GET", "/_searchable/_doc/1", True),  # a segment is whole or not at all
        ("TRACE", "/books", False),  # not the route's method: its 405
        ("POST", "/books/_search_shards/_search", False),
        ("GET", "/books/_doc/_search", False),  # the catch-all's still, but by the router
        ("GET", "/_answerbox/health", False),
        ("GET", "/_answerbox/ui/index.html", False),
        ("GET", "/metrics", False),
        ("POST", "/_plugins/_ml/memory", False),
        ("GET", "/_search/pipeline/p", False),
        ("POST", "/books/_msearch", False),
        ("POST", "/books/_msearch/template", False),  # the catch-all's still, but by the router
    ],
)
def test_the_passthrough_lane_takes_only_what_the_catch_all_alone_takes(method: str, path: str, own: bool) -> None:
    scope = _scope(method, path)
    assert _lanes()._passthroughs_own(scope) is own
    if own:
        assert _routed_to(scope) is answerbox_app._passthrough


def _sample_path(route: BaseRoute) -> str:
    assert isinstance(route, Route | Mount)
    return re.sub(r"\{[^}]+\}", "x", route.path) + ("/index.html" if not isinstance(route, Route) else "")


@pytest.mark.parametrize("route", answerbox_app._ROUTES[:-1], ids=lambda route: getattr(route, "path", "?"))
def test_no_request_of_answerboxs_own_routes_is_taken_as_the_passthroughs(route: BaseRoute) -> None:
    for method in getattr(route, "methods", None) or ["GET"]:
        scope = _scope(method, _sample_path(route))
        assert _routed_to(scope) is getattr(route, "endpoint", route)
        assert not _lanes()._passthroughs_own(scope)


def test_a_route_the_lanes_cannot_tell_apart_is_refused() -> None:
    async def endpoint(request: object) -> None: ...

    bare = Route("/{index}", endpoint, methods=["GET"])
    with pytest.raises(ValueError, match="no literal segment"):
        lanes.RouteShapes.of([bare, *answerbox_app._ROUTES])
    with pytest.raises(ValueError, match="catch-all"):
        lanes.RouteShapes.of(answerbox_app._ROUTES[:-1])


def _record_routing(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The path of each request that reaches Starlette's router, from now on."""
    routed: list[str] = []
    route = Router.__call__

    async def recorded(router: Router, scope: Scope, receive: Receive, send: Send) -> None:
        routed.append(scope["path"])
        await route(router, scope, receive, send)

    monkeypatch.setattr(Router, "__call__", recorded)
    return routed


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/books/_search"),
        ("POST", "/books/_msearch"),
        ("GET", "/books/_doc/1"),
        ("POST", "/_bulk"),
        ("HEAD", "/books"),
    ],
)
async def test_the_lanes_forward_without_the_router(monkeypatch: pytest.MonkeyPatch, method: str, path: str) -> None:
    """The router never runs: the lane forwarded the request, and the passthrough found
    OpenSearch unreachable (an error in OpenSearch's shape; a HEAD's has no body). A request of
    answerbox's own routes does go by the router."""
    routed = _record_routing(monkeypatch)
    async with in_process() as client:
        body = (b"{}\n" if path.endswith("_msearch") else b"") + json.dumps(QUERY).encode() + b"\n"
        response = await client.request(method, path, content=body, headers={"content-type": "application/json"})
        assert response.status_code == 502
        if method != "HEAD":
            assert opensearch_error(response, 502, "connect_exception") == "OpenSearch is unreachable"
        assert routed == []
        await client.get("/_search/pipeline")
        assert routed == ["/_search/pipeline"]


async def test_a_search_runs_its_pipeline_without_the_router(monkeypatch: pytest.MonkeyPatch) -> None:
    """An inline pipeline that narrows the search to one title: run by the lane, which answers
    with its hits, and the router never runs."""
    cluster = FakeOpenSearch()
    cluster.index_docs("books", DOCS)
    routed = _record_routing(monkeypatch)
    body = {**QUERY, "search_pipeline": {"request_processors": [{"only_title": {"title": "emma"}}]}}
    async with in_process(cluster=cluster, registry=registry_with_test_processors()) as client:
        response = await client.post("/books/_search", json=body)
    assert response.status_code == 200, response.text
    assert [hit["_id"] for hit in response.json()["hits"]["hits"]] == ["2"]
    assert routed == []


async def test_an_msearch_runs_its_pipelines_without_the_router(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same pipeline on one line of two: each line answered as it asked, and no router."""
    cluster = FakeOpenSearch()
    cluster.index_docs("books", DOCS)
    routed = _record_routing(monkeypatch)
    piped = {**QUERY, "search_pipeline": {"request_processors": [{"only_title": {"title": "emma"}}]}}
    lines = b"".join(json.dumps(line).encode() + b"\n" for line in [{}, piped, {}, QUERY])
    async with in_process(cluster=cluster, registry=registry_with_test_processors()) as client:
        response = await client.post("/books/_msearch", content=lines, headers={"content-type": "application/x-ndjson"})
    assert response.status_code == 200, response.text
    found = [[hit["_id"] for hit in answer["hits"]["hits"]] for answer in response.json()["responses"]]
    assert found == [["2"], ["1", "2"]]
    assert routed == []
