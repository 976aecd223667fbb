"""What a search asks of its hits: any at all (``size``), all of them page by page (``scroll``),
in whose order (``sort``), and whether it reads their scores.

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

__all__ = [
    "PLAIN_SEARCH",
    "HitsAsked",
    "asks_no_hits",
    "caller_sort",
    "hits_kept_as_found",
    "opens_scroll",
    "reads_scores",
]


def asks_no_hits(body: Mapping[str, Any], params: Mapping[str, str]) -> bool:
    """Whether the search's ``size`` (the URL's, else the body's) is 0: a count, or aggregations."""
    size = params.get("size", body.get("size"))
    try:
        return size is not None and int(size) == 0
    except (TypeError, ValueError):
        return False


def opens_scroll(params: Mapping[str, str]) -> bool:
    """Whether the search opens a scroll (``?scroll=1m``, a URL parameter only): an export of every
    hit, whose later pages (``_search/scroll``) no pipeline sees."""
    return bool(params.get("scroll"))


def hits_kept_as_found(body: Mapping[str, Any], params: Mapping[str, str]) -> str | None:
    """Why no response processor may touch the search's hits, or None when one may: a search for no
    hits would be answered from hits its caller does not see; a scroll's first page, reranked or
    thinned, would no longer match its later pages, and an export would lose the hits dropped."""
    if asks_no_hits(body, params):
        return "the search asks for no hits (size 0)"
    if opens_scroll(params):
        return "the search opens a scroll (an export whose later pages pass no pipeline)"
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


def caller_sort(body: Mapping[str, Any], params: Mapping[str, str]) -> str | None:
    """The first key of the search's own sort (the body's, else the URL's); None when it has none
    and its hits come in the engine's relevance order."""
    return _body_first(body.get("sort")) or _url_first(params.get("sort"))


def reads_scores(body: Mapping[str, Any], params: Mapping[str, str]) -> bool:
    """Whether anything the search answers depends on its hits' scores: False for a count (``size``
    0 and no aggregations) and for a search sorted by something else than ``_score`` first without
    ``track_scores``."""
    if asks_no_hits(body, params) and not (body.get("aggs") or body.get("aggregations")):
        return False
    first = caller_sort(body, params)
    tracked = str(params.get("track_scores", body.get("track_scores", False))).lower() == "true"
    return first in (None, "_score") or tracked


@dataclass(frozen=True, slots=True)
class HitsAsked:
    """What one search asks of its hits, read once when it opens; each step's plan follows it.
    The default is a plain search: hits in relevance order, their scores read."""

    kept_as_found: str | None = None  # why no response step may touch its hits (size 0, a scroll)
    sort: str | None = None  # the first key of its own sort
    scores: bool = True  # whether anything it answers reads its hits' scores

    @classmethod
    def of(cls, body: Mapping[str, Any], params: Mapping[str, str]) -> HitsAsked:
        return cls(hits_kept_as_found(body, params), caller_sort(body, params), reads_scores(body, params))


PLAIN_SEARCH = HitsAsked()  # a search that asks nothing special of its hits (``?explain``: no search)
