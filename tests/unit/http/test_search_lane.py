"""The lane for plain searches: it takes exactly the requests the ``_search`` routes would, answers
a plain one without Starlette's router, and hands any search a pipeline may apply to (its body
replayed) and everything else to the routes. That a search naming its pipeline (by body, parameter or
the index's default) runs it on the body the lane read is tests/unit/pipeline/test_pipeline_selection.py's,
since every ``_search`` there passes the lane."""

from __future__ import annotations

import pytest
from answerbox import app as answerbox_app
from answerbox.http import search_lane
from starlette.routing import Match
from starlette.types import Scope

from tests.unit.asgi import in_process, opensearch_error


def _scope(method: str, path: str, root_path: str = "") -> Scope:
    return {"type": "http", "method": method, "path": path, "root_path": root_path, "headers": []}


def _routed_to_search(scope: Scope) -> bool:
    """Whether Starlette's router sends ``scope`` to the ``_search`` endpoint: the first route
    that matches it fully."""
    for route in answerbox_app._ROUTES:
        match, _ = route.matches(scope)
        if match is Match.FULL:
            return getattr(route, "endpoint", None) is answerbox_app._search
    return False


@pytest.mark.parametrize(
    ("method", "path", "index"),
    [
        ("POST", "/_search", ""),
        ("GET", "/_search", ""),
        ("POST", "/books/_search", "books"),
        ("GET", "/books,films/_search", "books,films"),
        ("POST", "/_all/_search", "_all"),
        ("PUT", "/books/_search", None),
        ("HEAD", "/books/_search", None),  # the route's own way
        ("POST", "/books/_doc/_search", None),
        ("POST", "//_search", None),
        ("POST", "/_search/pipeline", None),
        ("GET", "/_search/pipeline/_search", None),
        ("POST", "/books/_msearch", None),
        ("POST", "/books/_search_shards", None),
        ("POST", "/books/_answerbox/stream", None),
        ("GET", "/_search/scroll", None),
    ],
)
def test_the_lane_takes_only_what_the_search_routes_take(method: str, path: str, index: str | None) -> None:
    scope = _scope(method, path)
    assert search_lane._search_index(scope) == index
    if index is not None:
        assert _routed_to_search(scope)
    elif method != "HEAD":
        assert not _routed_to_search(scope)


def test_a_mounted_app_goes_the_routes_way() -> None:
    assert search_lane._search_index(_scope("POST", "/books/_search", root_path="/answerbox")) is None


async def test_a_plain_search_is_forwarded_without_the_router(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``_search`` endpoint never runs: the lane forwarded the search (and the passthrough
    found OpenSearch unreachable, an error in OpenSearch's shape)."""

    async def never(*args: object) -> None:
        raise AssertionError("routed")

    monkeypatch.setattr(answerbox_app.SearchHandler, "search", never)
    async with in_process() as client:
        response = await client.post("/books/_search", json={"query": {"match": {"body": "spice"}}})
    assert opensearch_error(response, 502, "connect_exception") == "OpenSearch is unreachable"
