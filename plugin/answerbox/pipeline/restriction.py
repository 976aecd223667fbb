"""What of a caller's query restricts the documents it may see, wherever in the query it is.

A processor's own searches (CRAG's corrective search, a chain's node queries, the PRF search)
look for other documents than the caller's query found, but never outside what the caller's
query allows: a tenant filter inside a ``function_score`` or a ``dis_max`` binds them as much
as one at the top. ``restriction_of`` turns the caller's query into a filter that every
document the query can match also matches, with only the question's own text clauses let go:

- a scoring ``match``/``multi_match``/``simple_query_string`` whose text is the question
  restricts nothing (the processor's search replaces it);
- ``bool``: ``filter`` and ``must_not`` stay as written, each ``must`` clause is reduced in
  turn, and ``should`` clauses restrict when they are required (no ``must``/``filter``, or a
  ``minimum_should_match``): then at least one of them, reduced, must match;
- ``dis_max``: at least one of its queries; ``constant_score``: its filter; ``boosting``: its
  ``positive``; ``function_score``/``script_score``: their query; ``nested``: its query, at
  its path;
- any other query is kept whole, as a filter.

A restriction that cannot be written as a filter (a ``min_score``, which depends on the
question's score) raises ``Unscopable``: the processor's search does not run at all.
"""

from __future__ import annotations

from typing import Any

from answerbox.opensearch import JSON

__all__ = ["Unscopable", "restriction_of"]

_TEXT_KINDS = frozenset({"match", "multi_match", "simple_query_string"})


class Unscopable(Exception):
    """The caller's query restricts its results in a way a filter cannot carry."""


def restriction_of(query: Any, question: str | None) -> JSON | None:
    """A filter every document ``query`` matches also matches; None: it restricts nothing."""
    if query is None:
        return None
    if not isinstance(query, dict) or len(query) != 1:
        return _whole(query)
    ((kind, spec),) = query.items()
    if kind == "match_all":
        return None
    if kind in _TEXT_KINDS and _is_question(kind, spec, question):
        return None
    reduce = _COMPOUNDS.get(kind)
    if reduce is None or not isinstance(spec, dict):
        return _whole(query)
    return reduce(spec, question)


def _whole(query: Any) -> JSON:
    return query if isinstance(query, dict) else {"bool": {"filter": query}}


def _is_question(kind: str, spec: Any, question: str | None) -> bool:
    if question is None or not isinstance(spec, dict):
        return False
    if kind == "match":
        texts = [v.get("query") if isinstance(v, dict) else v for v in spec.values()]
    else:
        texts = [spec.get("query")]
    return len(texts) == 1 and isinstance(texts[0], str) and texts[0].split() == question.split()


def _clauses(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [] if value is None else [value]


def _all_of(restrictions: list[JSON | None], extra: JSON | None = None) -> JSON | None:
    kept = [r for r in restrictions if r is not None]
    if extra:
        return {"bool": {"filter": kept, **extra}}
    if not kept:
        return None
    return kept[0] if len(kept) == 1 else {"bool": {"filter": kept}}


def _any_of(restrictions: list[JSON | None]) -> JSON | None:
    if not restrictions:
        return {"match_none": {}}
    # One alternative that restricts nothing lets any document through.
    if any(r is None for r in restrictions):
        return None
    return restrictions[0] if len(restrictions) == 1 else {"bool": {"should": restrictions, "minimum_should_match": 1}}


def _bool(spec: JSON, question: str | None) -> JSON | None:
    parts = [restriction_of(q, question) for q in _clauses(spec.get("must"))]
    parts += [_whole(q) for q in _clauses(spec.get("filter"))]
    should = _clauses(spec.get("should"))
    if should and ("minimum_should_match" in spec or not (spec.get("must") or spec.get("filter"))):
        parts.append(_any_of([restriction_of(q, question) for q in should]))
    must_not = _clauses(spec.get("must_not"))
    return _all_of(parts, {"must_not": must_not} if must_not else None)


def _scored(spec: JSON, question: str | None) -> JSON | None:
    if spec.get("min_score") is not None:
        raise Unscopable("the query keeps hits by min_score")
    return restriction_of(spec.get("query"), question)


def _nested(spec: JSON, question: str | None) -> JSON | None:
    inner = restriction_of(spec.get("query"), question)
    kept = {k: v for k, v in spec.items() if k in ("path", "ignore_unmapped")}
    return {"nested": {**kept, "query": inner or {"match_all": {}}}}


def _dis_max(spec: JSON, question: str | None) -> JSON | None:
    return _any_of([restriction_of(q, question) for q in _clauses(spec.get("queries"))])


def _constant_score(spec: JSON, question: str | None) -> JSON | None:
    return _whole(spec["filter"]) if "filter" in spec else {"constant_score": spec}


def _boosting(spec: JSON, question: str | None) -> JSON | None:
    return restriction_of(spec["positive"], question) if "positive" in spec else {"boosting": spec}


_COMPOUNDS = {
    "bool": _bool,
    "dis_max": _dis_max,
    "constant_score": _constant_score,
    "boosting": _boosting,
    "function_score": _scored,
    "script_score": _scored,
    "nested": _nested,
}
