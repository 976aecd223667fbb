"""hits_asked: which searches ask for no hits, which carry a sort of their own (a processor keeps
their order), in every form OpenSearch takes ``size`` and ``sort`` in, body and URL, which read
their hits' scores, how many hits they read, and which no processor's search can be held to."""

from __future__ import annotations

from typing import Any

import pytest
from answerbox.pipeline.run.hits_asked import HitsAsked


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
    assert HitsAsked.of(body, {}).sort == first


@pytest.mark.parametrize(
    ("param", "first"),
    [("year:desc", "year"), ("year", "year"), ("_score:desc,_id", "_score"), ("year:sideways,_id", "_id"), ("", None)],
)
def test_the_url_s_sort_where_the_body_has_none(param: str, first: str | None) -> None:
    assert HitsAsked.of({"query": {"match_all": {}}}, {"sort": param}).sort == first
    assert HitsAsked.of({"sort": []}, {"sort": param}).sort == first


def test_the_url_s_sort_comes_after_the_body_s() -> None:
    # OpenSearch adds the URL's sort keys after the body's.
    assert HitsAsked.of({"sort": [{"year": "asc"}]}, {"sort": "_score"}).sort == "year"


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
    assert HitsAsked.of(body, params).scores is reads


@pytest.mark.parametrize(
    ("body", "params", "window"),
    [
        ({}, {}, 10),
        ({"size": 3, "from": 20}, {}, 23),
        ({"size": 3}, {"size": "7", "from": "1"}, 8),
        ({"size": -1, "from": 5}, {}, 5),
        ({"size": "many"}, {}, None),
        ({"from": [1]}, {}, None),
    ],
)
def test_how_many_hits_a_search_reads(body: dict[str, Any], params: dict[str, str], window: int | None) -> None:
    # limits.max_search_size bounds it; a value that is no number is left to OpenSearch's own error.
    assert HitsAsked.of(body, params).window == window


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ({"query": {"match_all": {}}}, None),
        ({"pit": {"id": "abc"}}, "the search reads a point in time"),
        ({"min_score": 0.5}, "the search keeps hits by min_score"),
    ],
)
def test_which_searches_no_processor_search_can_be_held_to(body: dict[str, Any], why: str | None) -> None:
    found = HitsAsked.of(body, {}).unscopable
    assert found == why if why is None else found is not None and found.startswith(why)


@pytest.mark.parametrize(
    ("body", "params", "why"),
    [
        ({"query": {"match_all": {}}}, {}, None),
        ({"size": 5}, {"scroll": ""}, None),
        ({"size": 5}, {"scroll": "1m"}, "the search opens a scroll"),
        ({"size": 0}, {"scroll": "1m"}, "the search asks for no hits (size 0)"),
        ({"size": 5}, {"size": "0"}, "the search asks for no hits (size 0)"),
        ({"size": 0}, {"size": "3"}, None),
        ({"size": -1}, {}, None),
    ],
)
def test_which_searches_keep_their_hits_as_found(body: dict[str, Any], params: dict[str, str], why: str | None) -> None:
    found = HitsAsked.of(body, params).kept_as_found
    if why is None:
        assert found is None
    else:
        assert found is not None
        assert found.startswith(why), found
