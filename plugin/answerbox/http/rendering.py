"""OpenSearch's rendering parameters, ``filter_path``, ``pretty`` and ``format``, on the answers
answerbox writes.

They shape how OpenSearch writes a response, not what a search finds, and OpenSearch applies them
last: a search pipeline's response processors read the whole response. So for a search answerbox
runs a pipeline for, they are kept off the searches it sends (its processors need the hits'
``_source``, which ``filter_path=hits.hits._id`` would drop) and applied to the answer it writes,
``ext`` included: ``filter_path=hits.hits._id,ext.answerbox.answer`` keeps the ids and the answer.

``filter_path`` is a comma-separated list of dotted paths; a segment may hold ``*`` wildcards,
``**`` stands for any number of levels (none included), arrays are looked through, and a path
that starts with ``-`` removes what it names. Exclusions apply first, then inclusions; an object
or array a path reaches into and finds empty is dropped. Errors are written whole, unfiltered.

``format`` is ``json`` or ``yaml``; OpenSearch's binary formats (``cbor``, ``smile``) are refused:
opensearch-py, which answerbox reads OpenSearch's answers with, reads neither, so sent on they
failed the search.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from starlette.responses import JSONResponse, Response

from answerbox.core.errors import InvalidRequest
from answerbox.core.wildcards import MAX_WILDCARDS, simple_match, wildcards

__all__ = ["JSON_MEDIA_TYPE", "RENDERING_PARAMS", "OpenSearchJSON", "Rendering", "accepts_gzip"]

# OpenSearch's own, charset included: answerbox's answers are typed as the cluster's are.
JSON_MEDIA_TYPE = "application/json; charset=UTF-8"


class OpenSearchJSON(JSONResponse):
    """A JSON answer of answerbox's own (its APIs, its errors), typed as OpenSearch types one."""

    media_type = JSON_MEDIA_TYPE


RENDERING_PARAMS = frozenset({"filter_path", "pretty", "format"})
_FORMATS = {"json": JSON_MEDIA_TYPE, "yaml": "application/yaml"}
# OpenSearch's ``http.compression_level`` default: a pipeline's answer is compressed as the
# cluster compresses its own for a caller that accepts gzip.
_GZIP_LEVEL = 3
# A filter's cost grows with its paths, their length and their ``**``s, times the answer's fields:
# past these (far past any filter a client writes) a filter_path is refused, not run.
MAX_FILTER_PATHS = 32
MAX_PATH_SEGMENTS = 16
MAX_ANY_LEVELS = 2

_Path = tuple[str, ...]
_ANY_LEVELS = "**"
_GONE = object()  # what a filter leaves of a value it removes whole
# As Starlette's JSONResponse writes JSON (a NaN is an error, not invalid JSON sent on).
_AS_STARLETTE: dict[str, Any] = {"ensure_ascii": False, "allow_nan": False}


def _here(paths: Iterable[_Path]) -> set[_Path]:
    """``paths`` with each leading ``**`` also taken as no level at all."""
    found: set[_Path] = set()
    todo = list(paths)
    while todo:
        path = todo.pop()
        if path not in found:
            found.add(path)
            if path and path[0] == _ANY_LEVELS:
                todo.append(path[1:])
    return found


def _below(paths: set[_Path], key: str) -> set[_Path]:
    """What is left of ``paths`` under the field ``key``."""
    left: set[_Path] = set()
    for path in paths:
        if not path:
            continue
        if path[0] == _ANY_LEVELS:
            left.add(path)  # ``**`` takes this level and may take more
        elif simple_match(path[0], key):
            left.add(path[1:])
    return left


def _filtered(value: Any, paths: set[_Path], *, keep: bool) -> Any:
    """What of ``value`` the inclusive ``paths`` name (``keep``), or ``value`` less what the
    exclusive ones name; ``_GONE`` where that is nothing."""
    paths = _here(paths)
    if () in paths:  # the path ends here: all of this value
        return value if keep else _GONE
    if isinstance(value, dict):
        out = {}
        for key, child in value.items():
            below = _below(paths, key)
            left = _filtered(child, below, keep=keep) if below else (_GONE if keep else child)
            if left is not _GONE:
                out[key] = left
        return out or _GONE
    if isinstance(value, list):  # arrays are looked through: their items are at this level
        items = [left for left in (_filtered(item, paths, keep=keep) for item in value) if left is not _GONE]
        return items or _GONE
    return _GONE if keep else value  # a path goes on below a value that has nothing below


def _path(expression: str) -> _Path:
    segments: list[str] = []
    for segment in expression.split(".") if expression else ():
        if not (segment == _ANY_LEVELS and segments[-1:] == [_ANY_LEVELS]):  # "**.**" is "**"
            segments.append(segment)
    if len(segments) > MAX_PATH_SEGMENTS or segments.count(_ANY_LEVELS) > MAX_ANY_LEVELS:
        raise InvalidRequest(
            f"filter_path [{expression}] has more than {MAX_PATH_SEGMENTS} segments or {MAX_ANY_LEVELS} [**]"
        )
    if sum(wildcards(segment) for segment in segments if segment != _ANY_LEVELS) > MAX_WILDCARDS:
        raise InvalidRequest(f"filter_path [{expression}] has more than {MAX_WILDCARDS} [*] wildcards")
    return tuple(segments)


@dataclass(frozen=True)
class Rendering:
    """How the caller asked an answer to be written."""

    includes: frozenset[_Path] = frozenset()
    excludes: frozenset[_Path] = frozenset()
    pretty: bool = False
    format: str = "json"  # a key of _FORMATS

    @classmethod
    def split(cls, params: Mapping[str, str]) -> tuple[Rendering, dict[str, str]]:
        """The rendering ``params`` ask for, and the rest of them, to send on."""
        rest = {name: value for name, value in params.items() if name not in RENDERING_PARAMS}
        if len(rest) == len(params):
            return cls(), rest
        includes: set[_Path] = set()
        excludes: set[_Path] = set()
        for part in (part.strip() for part in params.get("filter_path", "").split(",")):
            if path := _path(part.removeprefix("-")):
                (excludes if part.startswith("-") else includes).add(path)
        if len(includes) + len(excludes) > MAX_FILTER_PATHS:
            raise InvalidRequest(f"filter_path has more than {MAX_FILTER_PATHS} paths")
        pretty = params.get("pretty", "false") != "false"
        written = params.get("format", "json").lower()
        if written not in _FORMATS:
            raise InvalidRequest(f"format [{written}] is not one answerbox writes a pipeline's answer in: json or yaml")
        rendering = cls(includes=frozenset(includes), excludes=frozenset(excludes), pretty=pretty, format=written)
        return rendering, rest

    @property
    def media_type(self) -> str:
        return _FORMATS[self.format]

    @property
    def filters(self) -> bool:
        return bool(self.includes or self.excludes)

    def filtered(self, body: Any) -> Any:
        """``body`` as ``filter_path`` leaves it (``{}`` when it leaves nothing)."""
        if self.excludes:
            body = _filtered(body, set(self.excludes), keep=False)
        if self.includes and body is not _GONE:
            body = _filtered(body, set(self.includes), keep=True)
        return {} if body is _GONE else body

    def encoded(self, body: Any) -> bytes:
        body = self.filtered(body)
        if self.format == "yaml":  # as OpenSearch writes it: a document start, block style
            return yaml.safe_dump(body, explicit_start=True, sort_keys=False, allow_unicode=True).encode()
        if self.pretty:  # OpenSearch's own layout: two spaces, " : ", a final newline
            return (json.dumps(body, **_AS_STARLETTE, indent=2, separators=(",", " : ")) + "\n").encode()
        return json.dumps(body, **_AS_STARLETTE, separators=(",", ":")).encode()

    def gzipped(self, body: Any) -> bytes:
        return gzip.compress(self.encoded(body), _GZIP_LEVEL, mtime=0)

    async def response(self, body: Any, *, compressed: bool = False) -> Response:
        """``body`` as JSON (or YAML), gzipped where ``compressed``, written in a worker thread: an
        answer may hold thousands of hits."""
        if not compressed:
            return Response(await asyncio.to_thread(self.encoded, body), media_type=self.media_type)
        packed = await asyncio.to_thread(self.gzipped, body)
        return Response(packed, media_type=self.media_type, headers={"content-encoding": "gzip"})


def accepts_gzip(accept_encoding: str | None) -> bool:
    """Whether an ``Accept-Encoding`` takes gzip: named (or, where it is not, ``*``) with a
    weight above zero."""
    weights: dict[str, float] = {}
    for part in (accept_encoding or "").split(","):
        coding, *parameters = part.split(";")
        weight = 1.0
        for parameter in parameters:
            name, _, value = parameter.partition("=")
            if name.strip().lower() == "q":
                try:
                    weight = float(value)
                except ValueError:
                    weight = 0.0
        weights.setdefault(coding.strip().lower(), weight)
    named = next((weights[c] for c in ("gzip", "x-gzip", "*") if c in weights), 0.0)
    return named > 0
