"""What a memory holds, in ml-commons' field names (OpenSearch 2.12+ memory APIs).

A *memory* is a conversation; each *message* one question and its answer (``input``,
``response``), with ``additional_info`` a map of strings, as ml-commons keeps it. A message
with a ``parent_message_id`` is a *trace*: a step of its parent's making.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Interaction", "MemoryFields", "MessageUpdate", "NewMessage", "Paging"]

# ml-commons' default page (max_results) on every list.
DEFAULT_PAGE = 10


class MemoryFields(BaseModel):
    """The body of ``POST /_plugins/_ml/memory`` and ``PUT /_plugins/_ml/memory/{id}``."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, max_length=1000)


class NewMessage(BaseModel):
    """The body of ``POST /_plugins/_ml/memory/{id}/messages``."""

    model_config = ConfigDict(extra="forbid")

    input: str | None = None
    prompt_template: str | None = None
    response: str | None = None
    origin: str | None = None
    additional_info: dict[str, str] | None = None
    parent_message_id: str | None = None
    trace_number: int | None = Field(default=None, ge=0)


class MessageUpdate(BaseModel):
    """The body of ``PUT /_plugins/_ml/memory/message/{id}``: only ``additional_info`` may change."""

    model_config = ConfigDict(extra="forbid")

    additional_info: dict[str, str]


class Paging(BaseModel):
    """``max_results`` and ``next_token`` (the offset of the first result), as ml-commons pages."""

    model_config = ConfigDict(extra="forbid")

    max_results: int = Field(default=DEFAULT_PAGE, ge=1, le=1000)
    next_token: int = Field(default=0, ge=0, le=10_000)


@dataclass(frozen=True, slots=True)
class Interaction:
    """One earlier turn of a conversation, as the pipeline reads it back."""

    message_id: str
    input: str
    response: str
    additional_info: dict[str, Any] = field(default_factory=dict)

    @property
    def question(self) -> str:
        """What the turn asked, standing alone: answerbox stores its rewrite beside the input."""
        standalone = self.additional_info.get("standalone_question")
        return standalone if isinstance(standalone, str) and standalone else self.input

    @classmethod
    def from_message(cls, message: dict[str, Any]) -> Interaction:
        info = message.get("additional_info")
        return cls(
            message_id=str(message.get("message_id", "")),
            input=message.get("input") or "",
            response=message.get("response") or "",
            additional_info=info if isinstance(info, dict) else {},
        )
