"""restriction_of: every restriction of a caller's query, wherever it stands, and only the
question's own text let go."""

from __future__ import annotations

from typing import Any

import pytest
from answerbox.opensearch import JSON
from answerbox.pipeline.restriction import Unscopable, restriction_of

QUESTION = "capital of Germany"
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
    assert TENANT in _leaves(restriction_of(query, QUESTION))
    assert TEXT not in _leaves(restriction_of(query, QUESTION))


def test_must_not_stays_at_its_own_level() -> None:
    hidden = {"term": {"hidden": True}}
    query = {"function_score": {"query": {"bool": {"must": [TEXT], "must_not": [hidden]}}}}
    assert restriction_of(query, QUESTION) == {"bool": {"filter": [], "must_not": [hidden]}}


def test_the_question_alone_or_an_optional_clause_restricts_nothing() -> None:
    assert restriction_of(TEXT, QUESTION) is None
    assert restriction_of({"match_all": {}}, QUESTION) is None
    assert restriction_of({"bool": {"must": [TEXT], "should": [{"term": {"tag": "x"}}]}}, QUESTION) is None
    # One alternative of a dis_max that restricts nothing lets everything through.
    assert restriction_of({"dis_max": {"queries": [TEXT, TENANT_BOOL]}}, QUESTION) is None


def test_text_that_is_not_the_question_and_other_queries_are_kept_whole() -> None:
    other = {"match": {"tenant": "A"}}
    assert restriction_of({"bool": {"must": [TEXT, other]}}, QUESTION) == other
    lucene = {"query_string": {"query": "tenant:A"}}
    assert restriction_of(lucene, QUESTION) == lucene
    assert restriction_of(TEXT, None) == TEXT


def test_nested_keeps_its_path() -> None:
    query = {"nested": {"path": "owners", "query": {"bool": {"must": TEXT, "filter": TENANT}}, "score_mode": "max"}}
    assert restriction_of(query, QUESTION) == {"nested": {"path": "owners", "query": TENANT}}


def test_a_minimum_should_match_makes_should_clauses_bind() -> None:
    query = {"bool": {"must": [TEXT], "should": [TENANT, {"term": {"tenant": "B"}}], "minimum_should_match": 1}}
    assert restriction_of(query, QUESTION) == {
        "bool": {"should": [TENANT, {"term": {"tenant": "B"}}], "minimum_should_match": 1}
    }


def test_min_score_cannot_be_carried() -> None:
    with pytest.raises(Unscopable):
        restriction_of({"function_score": {"query": TEXT, "min_score": 3}}, QUESTION)


def _leaves(node: Any) -> list[Any]:
    if isinstance(node, list):
        return [leaf for item in node for leaf in _leaves(item)]
    if isinstance(node, dict):
        if set(node) & {"term", "match"}:
            return [node]
        return [leaf for value in node.values() for leaf in _leaves(value)]
    return []
