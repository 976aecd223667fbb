"""The caller's scope, and the only way a processor searches: within it.

A processor's own searches (the PRF search, CRAG's corrective search, a chain's node
queries) must never read more than the caller's search could. ``ScopedSearch`` carries
everything that narrows that search — the caller's credentials, the OpenSearch-side
pipeline, every restriction of the query wherever it stands (``restriction.py``), the URL's
``q``, ``post_filter``, ``routing``/``preference`` and the like, and ``_source`` filtering of
the body and the URL (``source_filter.py``) —
to every target, so no processor can forget one of them. A search whose restrictions a filter
cannot carry (``min_score``) gives its processors no searches at all: ``OutOfScope``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from answerbox.digest import json_digest
from answerbox.errors import OutOfScope
from answerbox.opensearch import JSON, Caller, SearchBackend
from answerbox.pipeline.restriction import Unscopable, restriction_of
from answerbox.pipeline.source_filter import SourceFilter, covers
from answerbox.query_text import question_of

__all__ = ["SCOPE_PARAMS", "ScopedSearch", "SearchScope"]

# Search parameters that decide which documents a search sees; each only ever narrows a
# search, of any target (routing to a shard of another index reads no more than all of it).
SCOPE_PARAMS = ("routing", "preference", "expand_wildcards", "ignore_unavailable", "allow_no_indices")
# The URL's Lucene query and its options: kept whole, as a filter (its text may hold a filter).
_Q_PARAMS = {
    "df": "default_field",
    "default_operator": "default_operator",
    "analyzer": "analyzer",
    "lenient": "lenient",
}


@dataclass(frozen=True, kw_only=True)
class SearchScope:
    """What the caller's search may see, taken from the search as the caller sent it."""

    caller: Caller
    index: str | None
    # The pipeline's OpenSearch-side processors, inline (filter_query and the like).
    native: JSON | None = None
    params: Mapping[str, str]
    # What every document the caller's query matches also matches (None: any document), or
    # why no filter can say it (``unscopable``): then no processor search runs.
    restriction: JSON | None = None
    unscopable: str | None = None
    post_filter: Any = None
    # _source filtering of the body and the URL together (``SourceFilter``): False hides every
    # field; includes None means all fields.
    source_enabled: bool = True
    includes: tuple[str, ...] | None = None
    excludes: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        *,
        caller: Caller,
        index: str | None,
        body: Mapping[str, Any],
        params: Mapping[str, str],
        native: JSON | None,
    ) -> SearchScope:
        source = SourceFilter.of(body, params)
        restriction, unscopable = _restriction(body, params)
        return cls(
            caller=caller,
            index=index,
            native=native,
            params={name: params[name] for name in SCOPE_PARAMS if name in params},
            restriction=restriction,
            unscopable=unscopable,
            post_filter=body.get("post_filter"),
            source_enabled=source.enabled,
            includes=source.includes,
            excludes=source.excludes,
        )

    def readable(self, fields: Sequence[str] | None) -> list[str] | None:
        """Of ``fields`` (None: all), those the caller's ``_source`` shows; [] when none is."""
        if not self.source_enabled:
            return []
        if fields is None or self.includes is None:
            return None if fields is None else list(fields)
        return [f for f in fields if any(covers(pattern, f) for pattern in self.includes)]

    def body(self, query: JSON, *, size: int, fields: Sequence[str] | None) -> JSON:
        """A search for ``query`` that sees no more than the caller's search."""
        if self.unscopable is not None:
            raise OutOfScope(f"no search of answerbox's own can keep the caller's restrictions: {self.unscopable}")
        readable = self.readable(fields)
        includes = readable if readable is not None else list(self.includes or ["*"])
        source: Any = {"includes": includes, "excludes": list(self.excludes)} if includes else False
        restricted: JSON = {"must": [query]} | ({"filter": [self.restriction]} if self.restriction is not None else {})
        body: JSON = {"size": size, "query": {"bool": restricted}, "_source": source}
        if self.post_filter is not None:
            body["post_filter"] = self.post_filter
        return body

    def key(self) -> str:
        """A digest of the scope, for caches of results that depend on what the caller can see."""
        parts = [
            self.caller.credentials,
            self.index,
            self.native,
            dict(self.params),
            self.restriction,
            self.unscopable,
            self.post_filter,
        ]
        parts += [self.source_enabled, self.includes, self.excludes]
        return json_digest(parts)


def _restriction(body: Mapping[str, Any], params: Mapping[str, str]) -> tuple[JSON | None, str | None]:
    if body.get("min_score") is not None:
        return None, "the search keeps hits by min_score"
    try:
        restriction = restriction_of(body.get("query"), question_of(body, {}))
    except Unscopable as exc:
        return None, str(exc)
    if "q" in params:
        lucene = {
            "query_string": {"query": params["q"]}
            | {key: params[name] for name, key in _Q_PARAMS.items() if name in params}
        }
        restriction = lucene if restriction is None else {"bool": {"filter": [restriction, lucene]}}
    return restriction, None


class ScopedSearch:
    """Searches on the caller's behalf, within the caller's scope: what processors get."""

    def __init__(self, backend: SearchBackend, scope: SearchScope) -> None:
        self._backend = backend
        self.scope = scope

    async def search(self, query: JSON, *, size: int, fields: Sequence[str] | None, index: str | None = None) -> JSON:
        body = self.scope.body(query, size=size, fields=fields)
        target = index or self.scope.index
        return await self._backend.search(
            index=target,
            body=body,
            params=dict(self.scope.params),
            caller=self.scope.caller,
            pipeline=self.scope.native,
        )

    async def msearch(
        self, queries: Sequence[JSON], *, size: int, fields: Sequence[str] | None, index: str | None = None
    ) -> list[Any]:
        """One response (or error object) per query, in order."""
        if not queries:
            return []
        target = index or self.scope.index
        # _msearch takes these per search, in the header.
        header: JSON = ({"index": target} if target else {}) | dict(self.scope.params)
        searches = [(header, self.scope.body(q, size=size, fields=fields)) for q in queries]
        answer = await self._backend.msearch(
            searches=searches, params={}, caller=self.scope.caller, pipeline=self.scope.native
        )
        responses: list[Any] = answer.get("responses", [])
        return responses
