"""Hits → the passages a model reads: one per text field of the hit's ``_source``.

Fields are named by dotted paths (``"body"``, ``"meta.summary"``); without a list every
top-level string field counts, in ``_source`` order. Arrays and non-string values are
skipped: a passage must be one string so that offsets into it name the exact text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from answerbox.processors.text.spans import Passage

__all__ = ["hit_key", "hits_of", "passages_of"]


def hits_of(response: Any) -> list[dict[str, Any]]:
    """The hits of a search response; [] for an error object or anything malformed."""
    hits = response.get("hits") if isinstance(response, Mapping) else None
    found = hits.get("hits") if isinstance(hits, Mapping) else None
    return [hit for hit in found if isinstance(hit, dict)] if isinstance(found, list) else []


def hit_key(hit: Mapping[str, Any]) -> tuple[str, str]:
    return str(hit.get("_index", "")), str(hit.get("_id", ""))


def _lookup(source: Mapping[str, Any], path: str) -> Any:
    if path in source:  # a literal dotted key wins, as in OpenSearch's flattened _source
        return source[path]
    value: Any = source
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def passages_of(hit: Mapping[str, Any], fields: Sequence[str] | None) -> list[Passage]:
    source = hit.get("_source")
    if not isinstance(source, Mapping):
        return []
    index, doc_id = hit_key(hit)
    named = fields if fields is not None else [k for k, v in source.items() if isinstance(v, str)]
    return [
        Passage(index=index, id=doc_id, field=field, text=value)
        for field in named
        if isinstance(value := _lookup(source, field), str) and value.strip()
    ]
