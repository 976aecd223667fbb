"""restriction_of: every restriction of a caller's query, wherever it stands, and only the
text on the fields the processor's own search looks in let go."""

from __future__ import annotations

from typing import Any

import pytest
from answerbox.opensearch import JSON
from answerbox.pipeline.caller_scope.restriction import Unscopable, restriction_of

QUESTION = "capital of Germany"
SEARCHED = ["text"]
TEXT: JSON = {"match": {"text": QUESTION}}
TENANT: JSON = {"term": {"tenant": "A"}}
TENANT_BOOL: JSON = {"bool": {"must": TEXT, "filter": TENANT}}


@pytest.mark.parametrize(
    "query",
    [
        TENANT_BOOL,
        {"function_score": {"query": TENANT_BOOL, "functions": [{"weight": 2}]}},
        {"script_score": {"query": TENANT_BOOL, "script": {"source": "1"}}},
        {"constant_score": {"filter": TENANT}},
        {"boosting": {"positive": TENANT_BOOL, "negative": {"term": {"old": True}}, "negative_boost": 0.5}},
        {
            "dis_max": {
                "queries": [TENANT_BOOL, {"bool": {"filter": [TENANT], "must": [{"match": {"title": QUESTION}}]}}]
            }
        },
        {"bool": {"must": [{"bool": {"must": [{"bool": {"filter": TENANT, "should": [TEXT]}}]}}]}},
        {"bool": {"should": [TENANT_BOOL]}},
    ],
    ids=[
        "bool",
        "function_score",
        "script_score",
        "constant_score",
        "boosting",
        "dis_max",
        "nested_bool",
        "required_should",
    ],
)
def test_a_tenant_filter_anywhere_in_the_query_is_kept(query: JSON) -> None:
    assert TENANT in _leaves(restriction_of(query, SEARCHED))
    assert TEXT not in _leaves(restriction_of(query, SEARCHED))


def test_must_not_stays_at_its_own_level() -> None:
    hidden = {"term": {"hidden": True}}
    query = {"function_score": {"query": {"bool": {"must": [TEXT], "must_not": [hidden]}}}}
    assert restriction_of(query, SEARCHED) == {"bool": {"filter": [], "must_not": [hidden]}}


def test_text_on_the_searched_fields_or_an_optional_clause_restricts_nothing() -> None:
    assert restriction_of(TEXT, SEARCHED) is None
    assert restriction_of({"match": {"text": {"query": "other words", "operator": "and"}}}, SEARCHED) is None
    assert restriction_of({"multi_match": {"query": "x", "fields": ["text^2"]}}, ["text", "title"]) is None
    assert restriction_of({"match_all": {}}, SEARCHED) is None
    assert restriction_of({"bool": {"must": [TEXT], "should": [{"term": {"tag": "x"}}]}}, SEARCHED) is None
    # One alternative of a dis_max that restricts nothing lets everything through.
    assert restriction_of({"dis_max": {"queries": [TEXT, TENANT_BOOL]}}, SEARCHED) is None


@pytest.mark.parametrize(
    "query",
    [
        {"match": {"org": "Acme Corp"}},
        {"match": {"text": QUESTION, "org": "Acme Corp"}},
        {"multi_match": {"query": QUESTION}},
        {"multi_match": {"query": QUESTION, "fields": ["text", "org"]}},
        {"simple_query_string": {"query": QUESTION, "fields": ["text"]}},
        {"query_string": {"query": "tenant:A"}},
        {"match_phrase": {"text": QUESTION}},
    ],
    ids=["other_field", "two_fields", "all_fields", "one_field_more", "simple_query_string", "lucene", "phrase"],
)
def test_text_anywhere_else_and_other_queries_are_kept_whole(query: JSON) -> None:
    assert restriction_of(query, SEARCHED) == query
    assert restriction_of({"bool": {"must": [TEXT, query]}}, SEARCHED) == query


def test_a_search_of_no_named_fields_lets_nothing_go() -> None:
    assert restriction_of(TEXT, []) == TEXT
    assert restriction_of({"multi_match": {"query": QUESTION, "fields": ["text"]}}, []) is not None


ORG: JSON = {"match": {"org": {"query": "Acme Corp", "operator": "and"}}}


@pytest.mark.parametrize(
    "query",
    [
        {"bool": {"must": [ORG, TEXT]}},
        {"bool": {"must": [ORG], "should": [TEXT]}},
        {"bool": {"should": [ORG, TEXT], "minimum_should_match": 2}},
    ],
    ids=["must", "should", "both_should"],
)
def test_a_tenant_match_on_another_field_is_kept_whatever_its_text(query: JSON) -> None:
    # The question is the org's text: it restricts still, as the caller's query matches.
    assert restriction_of(query, SEARCHED) == ORG


@pytest.mark.parametrize(
    ("minimum", "restriction"),
    [
        (2, TENANT),
        ("2", TENANT),
        ("100%", TENANT),
        ("-0", None),
        (1, None),
        ("50%", None),
        (-1, None),
        (3, {"match_none": {}}),
        ("3<90%", {"bool": {"should": [TEXT, TENANT], "minimum_should_match": "3<90%"}}),
        ("-50%", {"bool": {"should": [TEXT, TENANT], "minimum_should_match": "-50%"}}),
        (1.5, {"bool": {"should": [TEXT, TENANT], "minimum_should_match": 1.5}}),
    ],
)
def test_minimum_should_match_decides_how_many_should_clauses_bind(minimum: Any, restriction: JSON | None) -> None:
    query = {"bool": {"should": [TEXT, TENANT], "minimum_should_match": minimum}}
    assert restriction_of(query, SEARCHED) == restriction


def test_the_text_that_matched_counts_towards_the_minimum() -> None:
    other = {"term": {"tenant": "B"}}
    query = {"bool": {"must": [TEXT], "should": [TEXT, TENANT, other], "minimum_should_match": 2}}
    assert restriction_of(query, SEARCHED) == {"bool": {"should": [TENANT, other], "minimum_should_match": 1}}
    query = {"bool": {"should": [TEXT, TENANT, other], "minimum_should_match": "100%"}}
    assert restriction_of(query, SEARCHED) == {"bool": {"filter": [TENANT, other]}}


def test_without_must_or_filter_one_should_clause_binds() -> None:
    other = {"term": {"tenant": "B"}}
    assert restriction_of({"bool": {"should": [TENANT, other]}}, SEARCHED) == {
        "bool": {"should": [TENANT, other], "minimum_should_match": 1}
    }
    assert restriction_of({"bool": {"should": [TENANT], "must_not": [other]}}, SEARCHED) == {
        "bool": {"filter": [TENANT], "must_not": [other]}
    }


def test_nested_keeps_its_path() -> None:
    query = {"nested": {"path": "owners", "query": {"bool": {"must": TEXT, "filter": TENANT}}, "score_mode": "max"}}
    assert restriction_of(query, SEARCHED) == {"nested": {"path": "owners", "query": TENANT}}


def test_a_minimum_should_match_makes_should_clauses_bind() -> None:
    query = {"bool": {"must": [TEXT], "should": [TENANT, {"term": {"tenant": "B"}}], "minimum_should_match": 1}}
    assert restriction_of(query, SEARCHED) == {
        "bool": {"should": [TENANT, {"term": {"tenant": "B"}}], "minimum_should_match": 1}
    }


def test_min_score_cannot_be_carried() -> None:
    with pytest.raises(Unscopable):
        restriction_of({"function_score": {"query": TEXT, "min_score": 3}}, SEARCHED)


def _leaves(node: Any) -> list[Any]:
    if isinstance(node, list):
        return [leaf for item in node for leaf in _leaves(item)]
    if isinstance(node, dict):
        if set(node) & {"term", "match"}:
            return [node]
        return [leaf for value in node.values() for leaf in _leaves(value)]
    return []
