"""Which ``_source`` fields a caller's search shows, from its body and its URL together.

OpenSearch hides fields through the body's ``_source`` and ``stored_fields`` and through the
URL's ``_source``, ``_source_includes``, ``_source_excludes`` and ``stored_fields``. A
processor's own search must show no field that any of them hides, so the two are narrowed
into one filter: a field shows only when both sides show it. Where two include lists cannot
be intersected exactly (two different wildcards), a pattern is kept only when the other side
names it outright: a field too many is hidden, never one too few.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from answerbox.core.wildcards import simple_match

__all__ = ["SourceFilter", "covers"]

_NONE = "_none_"


def covers(pattern: str, field: str) -> bool:
    """Whether ``pattern`` shows ``field``: "title" shows "title.en" too, as OpenSearch's does."""
    return simple_match(pattern, field) or field.startswith(pattern.rstrip("*").rstrip(".") + ".")


def _patterns(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        return tuple(str(v) for v in value)
    return None


def _listed(value: str | None) -> tuple[str, ...] | None:
    """A URL parameter's comma-separated list; None when the parameter is absent."""
    if value is None:
        return None
    return tuple(part.strip() for part in value.split(",") if part.strip())


@dataclass(frozen=True)
class SourceFilter:
    """``enabled`` False hides every field; ``includes`` None shows all that ``excludes`` does not."""

    enabled: bool = True
    includes: tuple[str, ...] | None = None
    excludes: tuple[str, ...] = ()

    @classmethod
    def of(cls, body: Mapping[str, Any], params: Mapping[str, str]) -> SourceFilter:
        return cls._of_body(body).narrowed(cls._of_params(params))

    @classmethod
    def _of_body(cls, body: Mapping[str, Any]) -> SourceFilter:
        source = body.get("_source")
        if isinstance(source, dict):
            shown = cls(
                includes=_patterns(source.get("includes", source.get("include"))),
                excludes=_patterns(source.get("excludes", source.get("exclude"))) or (),
            )
        elif isinstance(source, bool):
            shown = cls(enabled=source)
        else:
            shown = cls(includes=_patterns(source))
        return shown.narrowed(_stored_fields(_patterns(body.get("stored_fields")), asked="_source" in body))

    @classmethod
    def _of_params(cls, params: Mapping[str, str]) -> SourceFilter:
        source = params.get("_source")
        shown = cls()
        if source is not None and source.strip().lower() in ("false", "true"):
            shown = cls(enabled=source.strip().lower() == "true")
        elif source is not None:
            shown = cls(includes=_listed(source))
        includes = _listed(params.get("_source_includes", params.get("_source_include")))
        excludes = _listed(params.get("_source_excludes", params.get("_source_exclude"))) or ()
        asked = source is not None or includes is not None or bool(excludes)
        return shown.narrowed(cls(includes=includes, excludes=excludes)).narrowed(
            _stored_fields(_listed(params.get("stored_fields")), asked=asked)
        )

    def narrowed(self, other: SourceFilter) -> SourceFilter:
        """The fields both filters show."""
        if self.includes is None or other.includes is None:
            includes = self.includes if other.includes is None else other.includes
        else:
            includes = tuple(
                dict.fromkeys(
                    [p for p in self.includes if any(covers(q, p) for q in other.includes)]
                    + [p for p in other.includes if any(covers(q, p) for q in self.includes)]
                )
            )
        return SourceFilter(
            enabled=self.enabled and other.enabled and includes != (),
            includes=includes,
            excludes=tuple(dict.fromkeys(self.excludes + other.excludes)),
        )


def _stored_fields(fields: tuple[str, ...] | None, *, asked: bool) -> SourceFilter:
    """``stored_fields`` loads no ``_source`` unless the search asks for it, and ``_none_`` none at all."""
    if fields is None:
        return SourceFilter()
    return SourceFilter(enabled=asked and _NONE not in fields)
