"""The caller's scope, and the only way a processor searches: within it.

A processor's own searches (the PRF search, CRAG's corrective search, a chain's node
queries) must never read more than the caller's search could. ``ScopedSearch`` carries
everything that narrows that search — the caller's credentials, the OpenSearch-side
pipeline, every restriction of the query wherever it stands (``restriction.py``), the URL's
``q``, ``post_filter``, ``routing``/``preference`` and the like, and ``_source`` filtering of
the body and the URL (``source_filter.py``) —
to every target, so no processor can forget one of them. A search whose restrictions a filter
cannot carry (``min_score``), or that reads a point in time (``pit``: its indices are the point
in time's, named by no path; both read in ``pipeline/run/hits_asked.py``), gives its processors
no searches at all: ``OutOfScope``.

What the caller's target itself binds travels with nothing: a filtered alias's filter, a routed
alias's routing apply only through that alias. So a processor's search of another index (CRAG's
``corrective.index``, a chain's ``index``) runs only once the caller's target is known to name no
such alias (``GET /{target}/_alias`` as the caller, cached briefly); otherwise, or when that
cannot be known, the search is ``OutOfScope``. A search of the caller's own target asks nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from answerbox.core.digest import json_digest
from answerbox.core.errors import OutOfScope, UpstreamError, UpstreamUnavailable
from answerbox.core.wildcards import MAX_WILDCARDS, simple_match, wildcards
from answerbox.opensearch import JSON, Caller, SearchBackend
from answerbox.pipeline.caller_scope.restriction import Unscopable, restriction_of
from answerbox.pipeline.caller_scope.source_filter import SourceFilter, covers

__all__ = ["SCOPE_PARAMS", "ScopedSearch", "SearchScope"]

# Search parameters that decide which indices a target resolves to: the alias lookup of the
# caller's target resolves it as the caller's search did.
_RESOLVING = ("expand_wildcards", "ignore_unavailable", "allow_no_indices")
# Search parameters that decide which documents a search sees; each only ever narrows a
# search, of any target (routing to a shard of another index reads no more than all of it).
SCOPE_PARAMS = ("routing", "preference", *_RESOLVING)
# What an alias binds a search through it to: lost on a search of another index.
# (``index_routing`` routes only writes.)
_BINDING = ("filter", "search_routing")
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
    # The caller's query and the URL's Lucene query (``q``): what ``restriction`` makes a filter
    # of, for each processor search; or why no filter can (``unscopable``): then none runs.
    query: Any = None
    lucene: JSON | None = None
    unscopable: str | None = None
    post_filter: Any = None
    # _source filtering of the body and the URL together (``SourceFilter``): False hides every
    # field; includes None means all fields.
    source_enabled: bool = True
    includes: tuple[str, ...] | None = None
    excludes: tuple[str, ...] = ()
    # restriction(searched), by the searched fields: a chain's node searches share one.
    _restrictions: dict[frozenset[str], JSON | None] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )

    @classmethod
    def of(
        cls,
        *,
        caller: Caller,
        index: str | None,
        body: Mapping[str, Any],
        params: Mapping[str, str],
        native: JSON | None,
        unscopable: str | None,
    ) -> SearchScope:
        """The scope of the caller's search of ``index`` with ``body`` and ``params``; ``unscopable``:
        why no filter can keep a processor's search within it (``HitsAsked.unscopable``)."""
        source = SourceFilter.of(body, params)
        return cls(
            caller=caller,
            index=index,
            native=native,
            params={name: params[name] for name in SCOPE_PARAMS if name in params},
            query=body.get("query"),
            lucene=_lucene(params),
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

    def restriction(self, searched: Collection[str]) -> JSON | None:
        """What every document the caller's search matches also matches, its ``match``/``multi_match``
        text on the ``searched`` fields let go (``restriction_of``); None: any document."""
        key = frozenset(searched)
        if key not in self._restrictions:
            try:
                if self.unscopable is not None:
                    raise Unscopable(self.unscopable)
                restriction = restriction_of(self.query, key)
            except Unscopable as exc:
                raise OutOfScope(f"no search of answerbox's own can keep the caller's restrictions: {exc}") from None
            if self.lucene is not None:
                restriction = self.lucene if restriction is None else {"bool": {"filter": [restriction, self.lucene]}}
            self._restrictions[key] = restriction
        return self._restrictions[key]

    def body(self, query: JSON, *, size: int, fields: Sequence[str] | None, searched: Collection[str] = ()) -> JSON:
        """A search for ``query``, which looks in the ``searched`` fields (none named: the caller's
        text is kept as a filter too), that sees no more than the caller's search."""
        restriction = self.restriction(searched)
        readable = self.readable(fields)
        includes = readable if readable is not None else list(self.includes or ["*"])
        source: Any = {"includes": includes, "excludes": list(self.excludes)} if includes else False
        restricted: JSON = {"must": [query]} | ({"filter": [restriction]} if restriction is not None else {})
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
            self.query,
            self.lucene,
            self.unscopable,
            self.post_filter,
        ]
        parts += [self.source_enabled, self.includes, self.excludes]
        return json_digest(parts)


def _lucene(params: Mapping[str, str]) -> JSON | None:
    if "q" not in params:
        return None
    return {
        "query_string": {"query": params["q"]}
        | {key: params[name] for name, key in _Q_PARAMS.items() if name in params}
    }


class ScopedSearch:
    """Searches on the caller's behalf, within the caller's scope: what processors get."""

    def __init__(self, backend: SearchBackend, scope: SearchScope) -> None:
        self._backend = backend
        self.scope = scope

    async def search(
        self,
        query: JSON,
        *,
        size: int,
        fields: Sequence[str] | None,
        searched: Collection[str] = (),
        index: str | None = None,
    ) -> JSON:
        """``query``'s hits within the caller's scope; ``searched``: the fields ``query`` looks for
        its text in, where the caller's own text is let go (see ``SearchScope.body``)."""
        body = self.scope.body(query, size=size, fields=fields, searched=searched)
        target = await self._target(index)
        return await self._backend.search(
            index=target,
            body=body,
            params=dict(self.scope.params),
            caller=self.scope.caller,
            pipeline=self.scope.native,
        )

    async def msearch(
        self,
        queries: Sequence[JSON],
        *,
        size: int,
        fields: Sequence[str] | None,
        searched: Collection[str] = (),
        index: str | None = None,
    ) -> list[Any]:
        """One response (or error object) per query, in order."""
        if not queries:
            return []
        target = await self._target(index)
        # _msearch takes these per search, in the header.
        header: JSON = ({"index": target} if target else {}) | dict(self.scope.params)
        searches = [(header, self.scope.body(q, size=size, fields=fields, searched=searched)) for q in queries]
        answer = await self._backend.msearch(
            searches=searches, params={}, caller=self.scope.caller, pipeline=self.scope.native
        )
        responses: list[Any] = answer.get("responses", [])
        return responses

    async def _target(self, index: str | None) -> str | None:
        """Where a processor's search goes: the caller's own target, or ``index`` once the caller's
        target is known to bind nothing a search of ``index`` would lose."""
        own = self.scope.index
        if not index or index == own:
            return own
        if own is None:  # the caller's search read every index as itself, through no alias
            return index
        params = {name: self.scope.params[name] for name in _RESOLVING if name in self.scope.params}
        try:
            aliases = await self._backend.aliases(index=own, params=params, caller=self.scope.caller)
        except (UpstreamError, UpstreamUnavailable) as exc:
            raise OutOfScope(
                f"the aliases of [{own}] could not be read ({exc.reason}), so [{index}] is not searched: "
                "a filter or routing of theirs would not apply there"
            ) from None
        bound = _binding_alias(aliases, own)
        if bound is not None:
            raise OutOfScope(
                f"[{own}] names the alias [{bound}], whose filter or routing would not apply to a search "
                f"of [{index}]; it is not searched"
            )
        return index


def _binding_alias(aliases: Mapping[str, Any], target: str) -> str | None:
    """An alias among ``target``'s that binds a search through it (``_BINDING``), or None.

    ``GET /{target}/_alias`` lists every alias of the indices ``target`` resolves to, those it
    does not name too: only those it names bind the caller's search."""
    for resolved in aliases.values():
        for name, alias in (resolved.get("aliases") or {}).items():
            if any(key in alias for key in _BINDING) and any(_names(e, name) for e in target.split(",")):
                return str(name)
    return None


def _names(expression: str, alias: str) -> bool:
    """Whether one expression of a target names ``alias``, itself or by a ``*`` wildcard; an
    excluded one (``-name``) counts as named, and date math, which only the cluster resolves,
    as naming every alias, and so does one with more ``*`` than any name needs: all only ever
    refuse more."""
    expression = expression.removeprefix("-")
    if expression.startswith("<") or wildcards(expression) > MAX_WILDCARDS:
        return True
    return simple_match(expression, alias)
