"""The response contract: what answerbox adds to a search response, in one place.

A search run through a pipeline with answerbox processors comes back as a normal
OpenSearch response plus::

    "ext": {
      "answerbox": {
        "answer":          null | Answer        # cited_answer
        "citations":       [Citation]           # the answer's checked citations, flattened
        "query_expansion": null | {...}          # llm_query_expansion
        "retrieval":       null | {...}          # retrieval_evaluator (CRAG)
        "chain":           null | {...}          # chain_of_query (SearChain)
        "timings_ms":      {"<processor>": ms, "search": ms, "total": ms}
        "warnings":        ["..."]              # degradations: LLM down, model failure, ...
      },
      "retrieval_augmented_generation": {"answer": "..."}   # for OpenSearch RAG clients
    }

Processors write their own section into ``PipelineContext.report``; the engine renders it
once, after the last response processor. Sections a processor owns are typed by that
processor's module; here they are plain JSON so this module depends on none of them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Answer", "AnswerboxReport", "Citation", "FlaggedClaim", "GenerativeQAParameters"]


class Citation(BaseModel):
    marker: int
    index: str = Field(serialization_alias="_index")
    id: str = Field(serialization_alias="_id")
    field: str
    start: int
    end: int
    quote: str
    support: float | None = None


class FlaggedClaim(BaseModel):
    """A sentence of the LLM's answer whose citation was removed by the check."""

    sentence: str
    marker: int
    # The marker is out of range / the block does not support it / no model could check it.
    reason: Literal["no_evidence", "unsupported", "unchecked"]
    support: float | None = None


class Answer(BaseModel):
    text: str
    citations: list[Citation] = []
    mode: str  # "generative" | "extractive" | "chain"
    abstained: bool = False
    flagged: list[FlaggedClaim] = []


class GenerativeQAParameters(BaseModel):
    """``ext.generative_qa_parameters``, accepted as OpenSearch's RAG processor accepts it."""

    model_config = ConfigDict(extra="forbid")

    llm_question: str | None = None
    llm_model: str | None = None
    context_size: int | None = Field(default=None, ge=1)
    timeout: float | None = Field(default=None, gt=0)
    system_prompt: str | None = None
    user_instructions: str | None = None
    message_size: int | None = Field(default=None, ge=1)
    memory_id: str | None = None
    llm_response_field: str | None = None


class AnswerboxReport(BaseModel):
    answer: Answer | None = None
    query_expansion: dict[str, Any] | None = None
    retrieval: dict[str, Any] | None = None
    chain: dict[str, Any] | None = None
    timings_ms: dict[str, float] = {}
    warnings: list[str] = []

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def render(self) -> dict[str, Any]:
        body = self.model_dump(by_alias=True)
        body["citations"] = body["answer"]["citations"] if self.answer else []
        return body
