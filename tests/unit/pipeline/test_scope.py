"""SearchScope and ScopedSearch: a processor's own search never sees more than the caller's."""

from __future__ import annotations

from typing import Any

import pytest
from answerbox.core.errors import OutOfScope, UpstreamError
from answerbox.opensearch import JSON, Caller
from answerbox.pipeline.caller_scope.scope import ScopedSearch, SearchScope
from answerbox.pipeline.run.hits_asked import HitsAsked

from tests.unit.fakes import RecordingBackend

QUERY: JSON = {"match": {"text": "nile"}}
FILTER: JSON = {"term": {"tenant": "a"}}
MUST_NOT: JSON = {"term": {"hidden": True}}
POST_FILTER: JSON = {"term": {"lang": "en"}}
NATIVE: JSON = {"request_processors": [{"filter_query": {"query": {"term": {"public": True}}}}]}


def _scope(
    body: JSON | None = None,
    *,
    index: str | None = "docs",
    params: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> SearchScope:
    return SearchScope.of(
        caller=Caller.from_headers(headers or {}),
        index=index,
        body=body or {},
        params=params or {},
        native=NATIVE,
        unscopable=HitsAsked.of(body or {}, params or {}).unscopable,
    )


@pytest.mark.parametrize(
    ("source", "readable"),
    [
        (True, ["title", "title.en", "body.text", "author"]),
        (False, []),
        ("title", ["title", "title.en"]),
        (["title", "body.*"], ["title", "title.en", "body.text"]),
        ({"includes": ["body.*"], "excludes": ["body.secret"]}, ["body.text"]),
        ({"include": "author", "exclude": "title"}, ["author"]),
    ],
    ids=["true", "false", "string", "list", "includes", "include"],
)
def test_source_filtering_decides_which_fields_a_processor_may_read(source: Any, readable: list[str]) -> None:
    scope = _scope({"_source": source})
    assert scope.readable(["title", "title.en", "body.text", "author"]) == readable


def test_excludes_are_carried_into_the_processors_search() -> None:
    scope = _scope({"_source": {"includes": ["body.*"], "excludes": ["body.secret"]}})
    assert scope.excludes == ("body.secret",)
    assert scope.body(QUERY, size=3, fields=None)["_source"] == {"includes": ["body.*"], "excludes": ["body.secret"]}
    single = _scope({"_source": {"include": "author", "exclude": "title"}})
    assert single.body(QUERY, size=3, fields=["author"])["_source"] == {"includes": ["author"], "excludes": ["title"]}


def test_source_false_fetches_no_source_at_all() -> None:
    scope = _scope({"_source": False})
    assert scope.readable(None) == []
    assert scope.body(QUERY, size=3, fields=["text"])["_source"] is False
    assert scope.body(QUERY, size=3, fields=None)["_source"] is False


def test_asking_only_for_hidden_fields_fetches_no_source() -> None:
    assert _scope({"_source": ["title"]}).body(QUERY, size=3, fields=["author"])["_source"] is False


def test_without_source_filtering_the_fields_asked_for_are_fetched() -> None:
    scope = _scope({"query": QUERY})
    assert scope.readable(None) is None
    assert scope.body(QUERY, size=3, fields=["text"])["_source"] == {"includes": ["text"], "excludes": []}
    assert scope.body(QUERY, size=3, fields=None)["_source"] == {"includes": ["*"], "excludes": []}


def test_filter_and_must_not_of_a_top_level_bool_are_kept_and_optional_or_searched_text_clauses_are_not() -> None:
    caller_query = {
        "bool": {"must": [QUERY], "should": [{"match": {"title": "river"}}], "filter": [FILTER], "must_not": [MUST_NOT]}
    }
    scope = _scope({"query": caller_query})
    body = scope.body({"match": {"text": "egypt"}}, size=5, fields=None, searched=["text"])
    assert body["size"] == 5
    kept = {"bool": {"filter": [FILTER], "must_not": [MUST_NOT]}}
    assert body["query"] == {"bool": {"must": [{"match": {"text": "egypt"}}], "filter": [kept]}}


def test_a_query_that_is_only_text_on_the_searched_fields_narrows_nothing() -> None:
    scope = _scope({"query": QUERY})
    assert scope.body(QUERY, size=1, fields=None, searched=["text"])["query"] == {"bool": {"must": [QUERY]}}
    # A search naming no fields looks in all of them: the caller's text stays a filter.
    assert scope.body(QUERY, size=1, fields=None)["query"] == {"bool": {"must": [QUERY], "filter": [QUERY]}}


def test_the_restriction_follows_the_fields_each_search_looks_in() -> None:
    org = {"match": {"org": {"query": "Acme Corp", "operator": "and"}}}
    scope = _scope({"query": {"bool": {"must": [org, QUERY]}}})
    assert scope.restriction(["text"]) == org
    assert scope.restriction(["org", "text"]) is None
    assert scope.restriction([]) == {"bool": {"filter": [org, QUERY]}}


def test_the_urls_lucene_query_is_kept_whole_as_a_filter() -> None:
    scope = _scope(params={"q": "tenant:a nile", "df": "text"})
    lucene = {"query_string": {"query": "tenant:a nile", "default_field": "text"}}
    assert scope.body(QUERY, size=1, fields=None)["query"] == {"bool": {"must": [QUERY], "filter": [lucene]}}


def test_min_score_cannot_be_carried_so_no_search_is_sent() -> None:
    for body in ({"query": QUERY, "min_score": 2}, {"query": {"function_score": {"query": QUERY, "min_score": 1}}}):
        with pytest.raises(OutOfScope, match="min_score"):
            _scope(body).body(QUERY, size=1, fields=None)


def test_post_filter_is_kept_for_every_target() -> None:
    scope = _scope({"post_filter": POST_FILTER})
    assert scope.body(QUERY, size=1, fields=None)["post_filter"] == POST_FILTER


def test_only_the_parameters_that_decide_what_is_seen_are_kept() -> None:
    params = {"routing": "r1", "preference": "_local", "expand_wildcards": "open", "size": "50", "timeout": "1s"}
    assert dict(_scope(params=params).params) == {"routing": "r1", "preference": "_local", "expand_wildcards": "open"}


def test_the_key_changes_with_credentials_and_filters_but_not_with_the_request_id() -> None:
    body = {"query": {"bool": {"must": [QUERY], "filter": [FILTER]}}}
    key = _scope(body, headers={"authorization": "Basic YTph", "x-opaque-id": "request-1"}).key()
    assert _scope(body, headers={"authorization": "Basic YTph", "x-opaque-id": "request-2"}).key() == key
    assert _scope(body, headers={"authorization": "Basic YTph"}).key() == key
    assert _scope(body, headers={"authorization": "Basic Yjpi"}).key() != key
    other_filter = {"query": {"bool": {"must": [QUERY], "filter": [{"term": {"tenant": "b"}}]}}}
    assert _scope(other_filter, headers={"authorization": "Basic YTph"}).key() != key
    assert _scope(body, headers={"authorization": "Basic YTph"}, params={"routing": "r2"}).key() != key


SCOPED_BODY: JSON = {
    "query": {"bool": {"must": [QUERY], "filter": [FILTER]}},
    "post_filter": POST_FILTER,
    "_source": ["text"],
}
SCOPED_PARAMS = {"routing": "r1", "preference": "_local", "expand_wildcards": "open"}
HEADERS = {"authorization": "Basic YTph"}


def _scoped(backend: RecordingBackend) -> ScopedSearch:
    return ScopedSearch(backend, _scope(SCOPED_BODY, params=SCOPED_PARAMS, headers=HEADERS))


async def test_search_runs_as_the_caller_within_the_callers_scope() -> None:
    backend = RecordingBackend()
    await _scoped(backend).search({"match": {"text": "egypt"}}, size=4, fields=["text", "secret"], searched=["text"])
    (call,) = backend.calls
    assert (call.method, call.index, call.params, call.pipeline) == ("search", "docs", SCOPED_PARAMS, NATIVE)
    assert call.caller.as_dict() == HEADERS
    assert call.body == {
        "size": 4,
        "query": {"bool": {"must": [{"match": {"text": "egypt"}}], "filter": [FILTER]}},
        "_source": {"includes": ["text"], "excludes": []},
        "post_filter": POST_FILTER,
    }


async def test_search_of_another_index_keeps_routing_preference_and_post_filter() -> None:
    backend = RecordingBackend()
    await _scoped(backend).search(QUERY, size=4, fields=["text"], searched=["text"], index="archive")
    (call,) = backend.calls
    assert call.index == "archive"
    assert call.params == SCOPED_PARAMS
    assert call.body["post_filter"] == POST_FILTER
    assert call.body["query"]["bool"]["filter"] == [FILTER]
    assert call.pipeline == NATIVE


async def test_msearch_puts_the_scope_parameters_in_each_header() -> None:
    backend = RecordingBackend()
    queries = [{"match": {"text": "a"}}, {"match": {"text": "b"}}]
    responses = await _scoped(backend).msearch(queries, size=2, fields=["text"])
    assert len(responses) == 2
    (call,) = backend.calls
    assert call.method == "msearch"
    assert call.params == {}
    assert call.pipeline == NATIVE
    assert call.caller.as_dict() == HEADERS
    headers = [header for header, _ in call.body]
    assert headers == [{"index": "docs", **SCOPED_PARAMS}] * 2
    assert [body["query"]["bool"]["must"] for _, body in call.body] == [[q] for q in queries]
    assert all(body["post_filter"] == POST_FILTER for _, body in call.body)


async def test_msearch_of_another_index_keeps_routing_preference_and_post_filter() -> None:
    backend = RecordingBackend()
    await _scoped(backend).msearch([QUERY], size=2, fields=["text"], searched=["text"], index="archive")
    ((header, body),) = backend.calls[0].body
    assert header == {"index": "archive", **SCOPED_PARAMS}
    assert body["post_filter"] == POST_FILTER
    assert body["query"]["bool"]["filter"] == [FILTER]


async def test_msearch_of_nothing_sends_nothing() -> None:
    backend = RecordingBackend()
    assert await _scoped(backend).msearch([], size=2, fields=None) == []
    assert backend.calls == []


@pytest.mark.parametrize(
    ("body", "params", "readable"),
    [
        ({}, {"_source": "false"}, []),
        ({}, {"_source_excludes": "author,body.*"}, ["title", "title.en", "body.text", "author"]),
        ({}, {"_source_includes": "title"}, ["title", "title.en"]),
        ({"_source": ["title", "author"]}, {"_source_includes": "author,body.*"}, ["author"]),
        ({"_source": {"excludes": ["title"]}}, {"_source": "title,author"}, ["title", "title.en", "author"]),
        ({"stored_fields": "_none_"}, {}, []),
        ({"stored_fields": ["title"]}, {}, []),
        ({"stored_fields": ["title"], "_source": ["title"]}, {}, ["title", "title.en"]),
        ({}, {"stored_fields": "title"}, []),
    ],
    ids=[
        "url_false",
        "url_excludes",
        "url_includes",
        "both_includes_narrowed",
        "body_excludes_url_includes",
        "stored_none",
        "stored_fields_without_source",
        "stored_fields_with_source",
        "url_stored_fields",
    ],
)
def test_the_url_and_stored_fields_narrow_what_a_processor_may_read(
    body: JSON, params: dict[str, str], readable: list[str]
) -> None:
    scope = _scope(body, params=params)
    assert scope.readable(["title", "title.en", "body.text", "author"]) == readable


def test_excludes_of_the_body_and_the_url_both_reach_the_processors_search() -> None:
    scope = _scope({"_source": {"excludes": ["title"]}}, params={"_source_excludes": "author,body.*"})
    assert scope.body(QUERY, size=3, fields=None)["_source"] == {
        "includes": ["*"],
        "excludes": ["title", "author", "body.*"],
    }


# --- another index than the caller's target: what an alias of the target binds ---------------------------

TENANT_A: JSON = {"filter": {"term": {"tenant": "A"}}}
DOCS_ALIASES: JSON = {"docs": {"aliases": {"tenant_a": TENANT_A, "tenant_b": {"filter": {"term": {"tenant": "B"}}}}}}


def _caller_on(target: str | None, backend: RecordingBackend, params: dict[str, str] | None = None) -> ScopedSearch:
    return ScopedSearch(backend, _scope({"query": QUERY}, index=target, params=params, headers=HEADERS))


async def test_a_search_of_the_callers_own_target_looks_up_no_alias() -> None:
    backend = RecordingBackend()
    await _caller_on("tenant_a", backend).search(QUERY, size=2, fields=None, index="tenant_a")
    await _caller_on("tenant_a", backend).msearch([QUERY], size=2, fields=None)
    assert backend.alias_lookups == []
    assert [call.method for call in backend.calls] == ["search", "msearch"]


async def test_a_plain_index_may_have_another_index_searched() -> None:
    backend = RecordingBackend()
    params = {"routing": "r1", "expand_wildcards": "all", "ignore_unavailable": "true"}
    await _caller_on("news", backend, params).search(QUERY, size=2, fields=None, index="wiki")
    (lookup,) = backend.alias_lookups
    # The target resolves as the caller's search resolved it; routing is no parameter of _alias.
    assert (lookup.index, lookup.params) == ("news", {"expand_wildcards": "all", "ignore_unavailable": "true"})
    assert lookup.caller.as_dict() == HEADERS
    assert [call.index for call in backend.calls] == ["wiki"]


@pytest.mark.parametrize(
    ("target", "aliases"),
    [
        ("tenant_a", DOCS_ALIASES),
        ("tenant_*", DOCS_ALIASES),
        ("news,tenant_a", {"news": {"aliases": {}}} | DOCS_ALIASES),
        ("shard_one", {"docs": {"aliases": {"shard_one": {"search_routing": "1", "index_routing": "1"}}}}),
        ("<docs-{now/d}>", DOCS_ALIASES),
    ],
    ids=["filtered", "wildcard", "one_of_several", "routed", "date_math"],
)
async def test_an_alias_that_binds_the_callers_search_refuses_another_index(target: str, aliases: JSON) -> None:
    backend = RecordingBackend()
    backend.alias_answers[target] = aliases
    search = _caller_on(target, backend)
    with pytest.raises(OutOfScope, match="would not apply"):
        await search.search(QUERY, size=2, fields=None, index="docs")
    with pytest.raises(OutOfScope, match="would not apply"):
        await search.msearch([QUERY], size=1, fields=None, index="docs")
    assert backend.calls == []


@pytest.mark.parametrize(
    ("target", "aliases"),
    [
        # The caller names the index itself: its filtered aliases bind nothing the caller reads.
        ("docs", DOCS_ALIASES),
        # The caller names an alias without a filter; its index's other aliases bind nothing either.
        ("everything", {"docs": {"aliases": {"everything": {}, **DOCS_ALIASES["docs"]["aliases"]}}}),
        ("writes", {"docs": {"aliases": {"writes": {"index_routing": "1"}}}}),
    ],
    ids=["index_itself", "unfiltered_alias", "write_routing_only"],
)
async def test_aliases_the_target_does_not_bind_through_leave_another_index_searchable(
    target: str, aliases: JSON
) -> None:
    backend = RecordingBackend()
    backend.alias_answers[target] = aliases
    await _caller_on(target, backend).search(QUERY, size=2, fields=None, index="wiki")
    assert [call.index for call in backend.calls] == ["wiki"]


async def test_aliases_that_cannot_be_read_refuse_another_index() -> None:
    backend = RecordingBackend()
    denied = {"error": {"type": "security_exception", "reason": "no permissions for [indices:admin/aliases/get]"}}
    backend.alias_answers["tenant_a"] = UpstreamError(403, denied)
    with pytest.raises(OutOfScope, match="could not be read"):
        await _caller_on("tenant_a", backend).search(QUERY, size=2, fields=None, index="docs")
    assert backend.calls == []


async def test_a_caller_without_a_target_reads_through_no_alias() -> None:
    backend = RecordingBackend()
    await _caller_on(None, backend).msearch([QUERY], size=1, fields=None, index="wiki")
    assert backend.alias_lookups == []
    ((header, _),) = backend.calls[0].body
    assert header == {"index": "wiki"}
