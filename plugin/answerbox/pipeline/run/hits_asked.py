"""What a search asks of its hits, read once when it opens (``HitsAsked.of``): how many (``from``
and ``size``), all of them page by page (``scroll``), in whose order (``sort``), whether it reads
their scores, and whether a processor's own search can be held to it (``pit``, ``min_score``).

OpenSearch's ``sort`` (body: a key, ``{key: order}``, ``{key: {"order": ...}}`` or a list of
them; URL: ``key[:asc|:desc],...``, added after the body's) is the caller's own order, ``_score``
first included: each hit then carries its sort values, which the caller pages on
(``search_after``). A processor that reordered such hits would break the order asked for, or
make the next page repeat or skip hits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["PLAIN_SEARCH", "HitsAsked"]


def _count(body: Mapping[str, Any], params: Mapping[str, str], name: str, default: int) -> int | None:
    """The URL's ``name``, else the body's, else ``default``; None when it is no number (OpenSearch's
    own error says what is wrong with it)."""
    try:
        return int(params.get(name, body.get(name, default)))
    except (TypeError, ValueError):
        return None


def _body_first(sort: Any) -> str | None:
    first = sort[0] if isinstance(sort, list) and sort else sort
    if isinstance(first, str) and first:
        return first
    if isinstance(first, dict) and first:
        return str(next(iter(first)))
    return None


def _url_first(sort: str | None) -> str | None:
    """As OpenSearch reads the URL's: ``key:order`` split at the last colon; another order is no key."""
    for part in (sort or "").split(","):
        key, colon, order = part.rpartition(":")
        if not colon:
            return part or None
        if order in ("asc", "desc"):
            return key
    return None


def _kept_as_found(size: int | None, params: Mapping[str, str]) -> str | None:
    # A search for no hits would be answered from hits its caller does not see; a scroll's first
    # page, reranked or thinned, would no longer match its later pages (``_search/scroll``, which
    # no pipeline sees), and an export would lose the hits dropped.
    if size == 0:
        return "the search asks for no hits (size 0)"
    if params.get("scroll"):
        return "the search opens a scroll (an export whose later pages pass no pipeline)"
    return None


def _unscopable(body: Mapping[str, Any]) -> str | None:
    if body.get("pit") is not None:
        # Its indices are the point in time's, named by no path: a processor's search of the
        # caller's target would read every index the caller can.
        return "the search reads a point in time, whose indices no other search can be held to"
    if body.get("min_score") is not None:
        return "the search keeps hits by min_score"
    return None


@dataclass(frozen=True, slots=True)
class HitsAsked:
    """What one search asks of its hits; each step's plan and the caller's scope follow it.
    The default is a plain search: ten hits in relevance order, their scores read."""

    kept_as_found: str | None = None  # why no response step may touch its hits (size 0, a scroll)
    sort: str | None = None  # the first key of its own sort; None: the engine's relevance order
    # Whether anything it answers reads its hits' scores: not a count (size 0, no aggregations),
    # nor a search sorted by something else than _score first without track_scores.
    scores: bool = True
    window: int | None = 10  # from + size: the hits it reads (None: not numbers)
    unscopable: str | None = None  # why no filter can keep a processor's search within it

    @classmethod
    def of(cls, body: Mapping[str, Any], params: Mapping[str, str]) -> HitsAsked:
        size, start = _count(body, params, "size", 10), _count(body, params, "from", 0)
        sort = _body_first(body.get("sort")) or _url_first(params.get("sort"))
        aggregates = bool(body.get("aggs") or body.get("aggregations"))
        tracked = str(params.get("track_scores", body.get("track_scores", False))).lower() == "true"
        return cls(
            kept_as_found=_kept_as_found(size, params),
            sort=sort,
            scores=(size != 0 or aggregates) and (sort in (None, "_score") or tracked),
            window=None if size is None or start is None else max(start, 0) + max(size, 0),
            unscopable=_unscopable(body),
        )


PLAIN_SEARCH = HitsAsked()  # a search that asks nothing special of its hits (``?explain``: no search)
