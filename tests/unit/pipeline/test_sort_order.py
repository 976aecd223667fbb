"""caller_order: which searches the caller sorted itself (a processor keeps their order), and which
come in relevance order, in every form OpenSearch takes ``sort`` in (body and URL)."""

from __future__ import annotations

from typing import Any

import pytest
from answerbox.pipeline.sort_order import caller_order


@pytest.mark.parametrize(
    ("sort", "order"),
    [
        (None, None),
        ([], None),
        ("_score", None),
        ({"_score": "desc"}, None),
        ([{"_score": {"order": "desc"}}, {"year": "asc"}], None),
        ("year", "year"),
        ([{"year": "asc"}], "year"),
        ([{"year": {"order": "desc", "missing": "_last"}}, "_score"], "year"),
        (["_doc"], "_doc"),
        ([{"_score": "asc"}], "_score (asc)"),
        ({"_geo_distance": {"location": [0, 0], "order": "asc"}}, "_geo_distance"),
    ],
)
def test_a_body_s_sort(sort: Any, order: str | None) -> None:
    body: dict[str, Any] = {"query": {"match_all": {}}}
    if sort is not None:
        body["sort"] = sort
    assert caller_order(body, {}) == order


@pytest.mark.parametrize(
    ("param", "order"),
    [
        ("year:desc", "year"),
        ("year", "year"),
        ("_score:desc,year:asc", None),
        ("_score", None),
        ("_score:asc", "_score (asc)"),
        ("year:sideways,_score", None),
    ],
)
def test_the_url_s_sort_where_the_body_has_none(param: str, order: str | None) -> None:
    assert caller_order({"query": {"match_all": {}}}, {"sort": param}) == order
    assert caller_order({"sort": []}, {"sort": param}) == order


def test_the_url_s_sort_comes_after_the_body_s() -> None:
    # OpenSearch adds the URL's sort keys after the body's.
    assert caller_order({"sort": ["_score"]}, {"sort": "year:desc"}) is None
    assert caller_order({"sort": [{"year": "asc"}]}, {"sort": "_score"}) == "year"
