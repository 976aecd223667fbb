"""The order a caller asked for: a search sorted by anything but its relevance keeps it.

OpenSearch's ``sort`` (body: a key, ``{key: order}``, ``{key: {"order": ...}}`` or a list of
them; URL: ``key[:asc|:desc],...``, added after the body's) orders hits by relevance only when
its first key is ``_score``, descending (its default). Any other first key (a field, ``_doc``,
a script, ``_score`` ascending) is the caller's own order, which a processor must not replace
with its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["caller_order"]

_SCORE = "_score"
_Key = tuple[str, str | None]  # a sort key and its order (None: the key's default)


def _body_first(sort: Any) -> _Key | None:
    first = sort[0] if isinstance(sort, list) and sort else sort
    if isinstance(first, str):
        return first, None
    if isinstance(first, dict) and first:
        key, spec = next(iter(first.items()))
        order = spec.get("order") if isinstance(spec, dict) else spec
        return str(key), order if isinstance(order, str) else None
    return None


def _url_first(sort: str | None) -> _Key | None:
    """As OpenSearch reads the URL's: ``key:order`` split at the last colon; another order is no key."""
    for part in (sort or "").split(","):
        key, colon, order = part.rpartition(":")
        if not colon:
            return (part, None) if part else None
        if order in ("asc", "desc"):
            return key, order
    return None


def caller_order(body: Mapping[str, Any], params: Mapping[str, str]) -> str | None:
    """The first key the caller's search is sorted by, when that is not relevance; None when its
    hits come in relevance order (no ``sort``, or ``_score`` descending first)."""
    first = _body_first(body.get("sort")) or _url_first(params.get("sort"))
    if first is None:
        return None
    key, order = first
    if key != _SCORE:
        return key
    return None if order is None or order.lower() == "desc" else f"{_SCORE} ({order})"
