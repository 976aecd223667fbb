"""hits_asked: which searches ask for no hits, which carry a sort of their own (a processor keeps
their order), in every form OpenSearch takes ``size`` and ``sort`` in, body and URL, and which
read their hits' scores."""

from __future__ import annotations

from typing import Any

import pytest
from answerbox.pipeline.run.hits_asked import asks_no_hits, caller_sort, hits_kept_as_found, reads_scores


@pytest.mark.parametrize(
    ("sort", "first"),
    [
        (None, None),
        ([], None),
        ("_score", "_score"),
        ({"_score": "desc"}, "_score"),
        ([{"_score": {"order": "desc"}}, "_id"], "_score"),
        ("year", "year"),
        ([{"year": "asc"}], "year"),
        ([{"year": {"order": "desc", "missing": "_last"}}, "_score"], "year"),
        (["_doc"], "_doc"),
        ({"_geo_distance": {"location": [0, 0], "order": "asc"}}, "_geo_distance"),
    ],
)
def test_a_body_s_sort(sort: Any, first: str | None) -> None:
    body: dict[str, Any] = {"query": {"match_all": {}}}
    if sort is not None:
        body["sort"] = sort
    assert caller_sort(body, {}) == first


@pytest.mark.parametrize(
    ("param", "first"),
    [("year:desc", "year"), ("year", "year"), ("_score:desc,_id", "_score"), ("year:sideways,_id", "_id"), ("", None)],
)
def test_the_url_s_sort_where_the_body_has_none(param: str, first: str | None) -> None:
    assert caller_sort({"query": {"match_all": {}}}, {"sort": param}) == first
    assert caller_sort({"sort": []}, {"sort": param}) == first


def test_the_url_s_sort_comes_after_the_body_s() -> None:
    # OpenSearch adds the URL's sort keys after the body's.
    assert caller_sort({"sort": [{"year": "asc"}]}, {"sort": "_score"}) == "year"


@pytest.mark.parametrize(
    ("body", "params", "reads"),
    [
        ({"query": {"match_all": {}}}, {}, True),
        ({"sort": ["_score", "_id"]}, {}, True),
        ({"sort": [{"_score": "asc"}]}, {}, True),
        ({"sort": [{"year": "desc"}]}, {}, False),
        ({"sort": [{"year": "desc"}], "track_scores": True}, {}, True),
        ({}, {"sort": "year:desc", "track_scores": "true"}, True),
        ({}, {"sort": "year:desc"}, False),
        ({"size": 0}, {}, False),
        ({}, {"size": "0"}, False),
        ({"size": 0, "aggs": {"best": {"top_hits": {}}}}, {}, True),
        ({"size": 0, "aggregations": {"best": {"top_hits": {}}}}, {}, True),
        ({"size": 1}, {}, True),
    ],
)
def test_which_searches_read_their_scores(body: dict[str, Any], params: dict[str, str], reads: bool) -> None:
    assert reads_scores(body, params) is reads


@pytest.mark.parametrize(
    ("body", "params", "none"),
    [({"size": 0}, {}, True), ({}, {"size": "0"}, True), ({"size": 0}, {"size": "3"}, False), ({}, {}, False)],
)
def test_which_searches_ask_for_no_hits(body: dict[str, Any], params: dict[str, str], none: bool) -> None:
    assert asks_no_hits(body, params) is none


@pytest.mark.parametrize(
    ("body", "params", "why"),
    [
        ({"query": {"match_all": {}}}, {}, None),
        ({"size": 5}, {"scroll": ""}, None),
        ({"size": 5}, {"scroll": "1m"}, "the search opens a scroll"),
        ({"size": 0}, {"scroll": "1m"}, "the search asks for no hits (size 0)"),
        ({"size": 5}, {"size": "0"}, "the search asks for no hits (size 0)"),
    ],
)
def test_which_searches_keep_their_hits_as_found(body: dict[str, Any], params: dict[str, str], why: str | None) -> None:
    found = hits_kept_as_found(body, params)
    if why is None:
        assert found is None
    else:
        assert found is not None
        assert found.startswith(why), found
