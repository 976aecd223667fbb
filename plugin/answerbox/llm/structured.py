"""Structured output: JSON that fits a schema, asked for in the form the endpoint takes.

OpenAI and vLLM take ``{"type": "json_schema", "json_schema": {...}}``; llama-cpp-python's
server (the embedded default) takes ``{"type": "json_object", "schema": {...}}`` and turns
the schema into a grammar. ``llm.structured_output: auto`` finds out which with one tiny
request (:data:`PROBE`) the first time structure is wanted.

Schemas stay small (a 135M model must fill them): every property required and no others,
which OpenAI's strict mode asks for, and arrays capped so a model that loops must stop.
Replies are read leniently (:func:`from_json`): a reply that is not the JSON asked for
(cut off at ``max_tokens``, or prose) is None, and the caller reads it as free text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

__all__ = ["PROBE", "STRING", "Schema", "StructuredMode", "array", "from_json", "object_schema", "response_format"]

StructuredMode = Literal["json_schema", "json_object", "none"]
M = TypeVar("M", bound=BaseModel)

STRING: dict[str, Any] = {"type": "string"}


def object_schema(**properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def array(items: dict[str, Any], max_items: int) -> dict[str, Any]:
    return {"type": "array", "items": items, "maxItems": max_items}


@dataclass(frozen=True, slots=True)
class Schema:
    name: str  # json_schema's name: letters, digits, _ and -
    body: dict[str, Any]


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
