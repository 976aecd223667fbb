"""What a memory holds, in ml-commons' field names (OpenSearch 2.12+ memory APIs).

A *memory* is a conversation; each *message* one question and its answer (``input``,
``response``), with ``additional_info`` a map of strings, as ml-commons keeps it. A message
with a ``parent_message_id`` is a *trace*: a step of its parent's making.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

__all__ = ["MAX_MESSAGE_CHARS", "Interaction", "MemoryFields", "MessageUpdate", "NewMessage", "Paging"]

# ml-commons' default page (max_results) on every list.
DEFAULT_PAGE = 10
# The most characters a message's field (and its additional_info, keys and values together)
# may hold. Every follow-up reads the last turns back, so one 2.6 MB message stalled each
# later search in the rules rewrite and pushed the LLM's prompt past its limit (a 400).
MAX_MESSAGE_CHARS = 20_000


def _bounded_info(info: dict[str, str] | None) -> dict[str, str] | None:
    if info is not None and sum(len(k) + len(v) for k, v in info.items()) > MAX_MESSAGE_CHARS:
        raise ValueError(f"additional_info holds more than {MAX_MESSAGE_CHARS} characters")
    return info


_Text = Annotated[str, Field(max_length=MAX_MESSAGE_CHARS)]
_Info = Annotated[dict[str, str], AfterValidator(_bounded_info)]


def _cut(value: Any) -> str:
    """A stored field as text, cut to the limit: a message stored before there was one is read,
    never allowed to break or stall the turns after it."""
    return value[:MAX_MESSAGE_CHARS] if isinstance(value, str) else ""


class MemoryFields(BaseModel):
    """The body of ``POST /_plugins/_ml/memory`` and ``PUT /_plugins/_ml/memory/{id}``."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, max_length=1000)


class NewMessage(BaseModel):
    """The body of ``POST /_plugins/_ml/memory/{id}/messages``."""

    model_config = ConfigDict(extra="forbid")

    input: _Text | None = None
    prompt_template: _Text | None = None
    response: _Text | None = None
    origin: _Text | None = None
    additional_info: _Info | None = None
    parent_message_id: str | None = None
    trace_number: int | None = Field(default=None, ge=0)


class MessageUpdate(BaseModel):
    """The body of ``PUT /_plugins/_ml/memory/message/{id}``: only ``additional_info`` may change."""

    model_config = ConfigDict(extra="forbid")

    additional_info: _Info


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
        standalone = _cut(self.additional_info.get("standalone_question"))
        return standalone or self.input

    @classmethod
    def from_message(cls, message: dict[str, Any]) -> Interaction:
        info = message.get("additional_info")
        return cls(
            message_id=str(message.get("message_id", "")),
            input=_cut(message.get("input")),
            response=_cut(message.get("response")),
            additional_info=info if isinstance(info, dict) else {},
        )
