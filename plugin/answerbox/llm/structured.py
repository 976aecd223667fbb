"""Structured output: JSON that fits a schema, asked for in the form the endpoint takes.

OpenAI and vLLM take ``{"type": "json_schema", "json_schema": {...}}``; llama-cpp-python's
server (the embedded default) takes ``{"type": "json_object", "schema": {...}}`` and turns
the schema into a grammar. ``llm.structured_output: auto`` finds out which with one tiny
request (:data:`PROBE`) the first time structure is wanted.

Schemas stay small (a 135M model must fill them): every property required and no others,
which OpenAI's strict mode asks for, and arrays capped so a model that loops must stop.
Strings may be capped too (:func:`string`): a model that repeats itself inside a string
otherwise runs into ``max_tokens`` before the JSON closes. llama.cpp's grammars and vLLM
honour ``maxLength``; OpenAI's strict mode documents no length keywords, so a server that
refuses a capped schema gets it again without the caps (:meth:`Schema.uncapped`), and the
client remembers.
Replies are read leniently (:func:`from_json`): a reply that is not the JSON asked for
(cut off at ``max_tokens``, or prose) is None, and the caller reads it as free text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

__all__ = [
    "PROBE",
    "STRING",
    "Schema",
    "StructuredMode",
    "array",
    "from_json",
    "object_schema",
    "response_format",
    "string",
]

StructuredMode = Literal["json_schema", "json_object", "none"]
M = TypeVar("M", bound=BaseModel)

STRING: dict[str, Any] = {"type": "string"}
_CAP = "maxLength"


def string(max_length: int) -> dict[str, Any]:
    """A string of at most ``max_length`` characters, where the endpoint honours the cap."""
    return {"type": "string", _CAP: max_length}


def object_schema(**properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def array(items: dict[str, Any], max_items: int) -> dict[str, Any]:
    return {"type": "array", "items": items, "maxItems": max_items}


@dataclass(frozen=True, slots=True)
class Schema:
    name: str  # json_schema's name: letters, digits, _ and -
    body: dict[str, Any]

    @property
    def capped(self) -> bool:
        return _has_cap(self.body)

    def uncapped(self) -> Schema:
        """The same schema without string length caps, for a server that refuses them."""
        return Schema(self.name, _without_caps(self.body))


def _has_cap(node: Any) -> bool:
    if isinstance(node, dict):
        return _CAP in node or any(_has_cap(v) for v in node.values())
    return isinstance(node, list) and any(_has_cap(v) for v in node)


def _without_caps(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_caps(v) for k, v in node.items() if k != _CAP}
    if isinstance(node, list):
        return [_without_caps(v) for v in node]
    return node


PROBE = Schema("probe", object_schema(ok={"type": "boolean"}))


def response_format(mode: StructuredMode, schema: Schema) -> dict[str, Any] | None:
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": schema.name, "schema": schema.body, "strict": True}}
    if mode == "json_object":
        return {"type": "json_object", "schema": schema.body}
    return None


def from_json(model: type[M], text: str) -> M | None:
    """``text`` read as ``model``, or None when it is not that JSON."""
    try:
        return model.model_validate_json(text)
    except ValidationError:
        return None
