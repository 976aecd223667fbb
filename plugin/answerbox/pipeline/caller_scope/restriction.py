"""What of a caller's query restricts the documents it may see, wherever in the query it is.

A processor's own searches (CRAG's corrective search, a chain's node queries, the PRF search)
look for other documents than the caller's query found, but never outside what the caller's
query allows: a tenant filter inside a ``function_score`` or a ``dis_max`` binds them as much
as one at the top. ``restriction_of`` turns the caller's query into a filter that every
document the query can match also matches, letting go only of what the processor's search
replaces: the caller's text on the fields that search looks in (``searched``). The caller could
have asked those fields for any words; a ``match`` on any other field (an ``org``, a tenant)
may be what keeps other tenants out, whatever its text, and stays.

- a ``match``, or a ``multi_match`` naming its ``fields``, on ``searched`` fields only
  restricts nothing;
- ``bool``: ``filter`` and ``must_not`` stay as written, each ``must`` clause is reduced in
  turn, and as many ``should`` clauses as ``minimum_should_match`` requires (OpenSearch's
  default: one when there is no ``must``/``filter``) must match, reduced; an alternative that
  restricts nothing counts as matched. A ``minimum_should_match`` not computed exactly here
  (``"3<90%"``) keeps the whole ``bool``;
- ``dis_max``: at least one of its queries; ``constant_score``: its filter; ``boosting``: its
  ``positive``; ``function_score``/``script_score``: their query; ``nested``: its query, at
  its path;
- any other query, text of any other kind (``simple_query_string`` has operators) included,
  is kept whole, as a filter.

A restriction that cannot be written as a filter (a ``min_score``, which depends on the
question's score) raises ``Unscopable``: the processor's search does not run at all.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import Any

from answerbox.opensearch import JSON

__all__ = ["Unscopable", "restriction_of"]

# OpenSearch's simple forms of minimum_should_match: a count or a percentage, either negative.
_SIMPLE_MSM = re.compile(r"(-?\d+)(%?)")


class Unscopable(Exception):
    """The caller's query restricts its results in a way a filter cannot carry."""


def restriction_of(query: Any, searched: Collection[str]) -> JSON | None:
    """A filter every document ``query`` matches also matches, with the ``match``/``multi_match``
    text on ``searched`` fields let go; None: it restricts nothing."""
    return _reduce(query, frozenset(searched))


def _reduce(query: Any, searched: frozenset[str]) -> JSON | None:
    if query is None:
        return None
    if not isinstance(query, dict) or len(query) != 1:
        return _whole(query)
    ((kind, spec),) = query.items()
    if kind == "match_all" or _fields_of(kind, spec) <= searched:
        return None
    reduce = _COMPOUNDS.get(kind)
    if reduce is None or not isinstance(spec, dict):
        return _whole(query)
    return reduce(spec, searched)


def _whole(query: Any) -> JSON:
    return query if isinstance(query, dict) else {"bool": {"filter": query}}


def _fields_of(kind: str, spec: Any) -> frozenset[str | None]:
    """The fields a text query looks in; {None} for any other query, or one whose fields are unknown
    (a ``multi_match`` without ``fields`` searches the index's default fields)."""
    if not isinstance(spec, dict):
        return frozenset({None})
    if kind == "match" and len(spec) == 1:
        return frozenset(spec)
    if kind == "multi_match":
        fields = _clauses(spec.get("fields"))
        if fields and all(isinstance(f, str) for f in fields):
            return frozenset(f.split("^")[0] for f in fields)
    return frozenset({None})


def _clauses(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [] if value is None else [value]


def _all_of(restrictions: Sequence[JSON | None], extra: JSON | None = None) -> JSON | None:
    kept = [r for r in restrictions if r is not None]
    if extra:
        return {"bool": {"filter": kept, **extra}}
    if not kept:
        return None
    return kept[0] if len(kept) == 1 else {"bool": {"filter": kept}}


def _at_least(required: int, restrictions: list[JSON | None]) -> JSON | None:
    """At least ``required`` of the clauses match: of those that restrict, ``required`` less those that do not."""
    kept = [r for r in restrictions if r is not None]
    required -= len(restrictions) - len(kept)
    if required <= 0:
        return None
    if required > len(kept):
        return {"match_none": {}}
    if required == len(kept):
        return _all_of(kept)
    return {"bool": {"should": kept, "minimum_should_match": required}}


def _required_should(spec: JSON, count: int) -> int | None:
    """How many of the ``count`` should clauses a document must match, as OpenSearch computes it;
    None when this module cannot tell exactly."""
    # Without must or filter, Lucene asks one should clause of every hit, whatever the minimum.
    floor = 0 if _clauses(spec.get("must")) or _clauses(spec.get("filter")) else 1
    value = spec.get("minimum_should_match")
    if value is None:
        return floor
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    simple = _SIMPLE_MSM.fullmatch(str(value).strip())
    if simple is None:
        return None
    number, percent = int(simple[1]), simple[2] == "%"
    if percent and number < 0:
        # OpenSearch computes it in float and truncates toward zero: off by one now and then,
        # downwards as often as not.
        return None
    # Exact, then truncated: where OpenSearch's float math differs it asks one fewer, so this
    # filter is at worst narrower than the caller's query.
    wanted = count * number // 100 if percent else number
    return max(count + wanted if wanted < 0 else wanted, floor)


def _bool(spec: JSON, searched: frozenset[str]) -> JSON | None:
    should = _clauses(spec.get("should"))
    required = _required_should(spec, len(should))
    if required is None:
        return _whole({"bool": spec})
    parts = [_reduce(q, searched) for q in _clauses(spec.get("must"))]
    parts += [_whole(q) for q in _clauses(spec.get("filter"))]
    if should and required:
        parts.append(_at_least(required, [_reduce(q, searched) for q in should]))
    must_not = _clauses(spec.get("must_not"))
    return _all_of(parts, {"must_not": must_not} if must_not else None)


def _scored(spec: JSON, searched: frozenset[str]) -> JSON | None:
    if spec.get("min_score") is not None:
        raise Unscopable("the query keeps hits by min_score")
    return _reduce(spec.get("query"), searched)


def _nested(spec: JSON, searched: frozenset[str]) -> JSON | None:
    inner = _reduce(spec.get("query"), searched)
    kept = {k: v for k, v in spec.items() if k in ("path", "ignore_unmapped")}
    return {"nested": {**kept, "query": inner or {"match_all": {}}}}


def _dis_max(spec: JSON, searched: frozenset[str]) -> JSON | None:
    queries = _clauses(spec.get("queries"))
    return _at_least(1, [_reduce(q, searched) for q in queries]) if queries else {"match_none": {}}


def _constant_score(spec: JSON, searched: frozenset[str]) -> JSON | None:
    return _whole(spec["filter"]) if "filter" in spec else {"constant_score": spec}


def _boosting(spec: JSON, searched: frozenset[str]) -> JSON | None:
    return _reduce(spec["positive"], searched) if "positive" in spec else {"boosting": spec}


_COMPOUNDS = {
    "bool": _bool,
    "dis_max": _dis_max,
    "constant_score": _constant_score,
    "boosting": _boosting,
    "function_score": _scored,
    "script_score": _scored,
    "nested": _nested,
}
