"""A search pipeline definition in OpenSearch's JSON shape."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from answerbox.core.digest import json_digest
from answerbox.core.errors import ConfigError, InvalidRequest, validation_problems

__all__ = ["AD_HOC_PIPELINE_ID", "NATIVE_TYPES", "PipelineDefinition", "ProcessorEntry", "validate_pipeline_id"]

# OpenSearch's own processor types (core and the neural-search / ml-commons plugins).
# They are sent to OpenSearch inline; any other unknown type is rejected up front, as
# OpenSearch rejects it.
NATIVE_TYPES: dict[str, frozenset[str]] = {
    "request_processors": frozenset(
        {
            "filter_query", "script", "oversample", "neural_query_enricher", "neural_sparse_two_phase_processor",
            "ml_inference", "agentic_query_translator",
        }
    ),
    "response_processors": frozenset(
        {
            "rename_field", "collapse", "truncate_hits", "sort", "split", "rerank", "personalize_search_ranking",
            "retrieval_augmented_generation", "ml_inference", "explanation_response_processor",
        }
    ),
    "phase_results_processors": frozenset({"normalization-processor", "score-ranker-processor"}),
}  # fmt: skip

# The answer's rules, one value for the pipeline (``docs/confidence.md``): its ``answer`` section's,
# else (as stored pipelines set them) the last that a step which may answer sets.
ANSWER_RULES = ("min_confidence", "skip_llm_above", "calibration")

# The id a search's own (inline) pipeline runs under.
AD_HOC_PIPELINE_ID = "_ad_hoc_pipeline"

ProcessorEntry = dict[str, dict[str, Any]]

# What OpenSearch refuses in names it stores (index names' invalid file-name characters,
# plus '#'), whitespace and control characters; `_none` means "no pipeline" in a search.
_INVALID_ID = re.compile(r'[\\/*?"<>|,#\s\x00-\x1f\x7f]')
_MAX_ID_BYTES = 255


def validate_pipeline_id(pipeline_id: str) -> str:
    problem = None
    if pipeline_id in ("", ".", "..", "_none"):
        problem = "it is reserved"
    elif len(pipeline_id.encode()) > _MAX_ID_BYTES:
        problem = f"it is longer than {_MAX_ID_BYTES} bytes"
    elif found := _INVALID_ID.search(pipeline_id):
        problem = f"it must not contain {found.group()!r}"
    if problem:
        shown = pipeline_id.encode("unicode_escape").decode()[:300]
        raise InvalidRequest(f"invalid search pipeline id [{shown}]: {problem}")
    return pipeline_id


class PipelineDefinition(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str | None = None
    version: int | None = None
    # answerbox's own: the time all its processors share in one search (limits.pipeline_budget_s if unset).
    budget_s: float | None = Field(default=None, gt=0)
    # answerbox's own: the answer's rules (ANSWER_RULES), for every step that answers or may
    # (cited_answer, chain_of_query), which validate them.
    answer: dict[str, Any] | None = None
    request_processors: list[ProcessorEntry] = []
    response_processors: list[ProcessorEntry] = []
    phase_results_processors: list[ProcessorEntry] = []

    @field_validator("request_processors", "response_processors", "phase_results_processors")
    @classmethod
    def _one_type_each(cls, entries: list[ProcessorEntry]) -> list[ProcessorEntry]:
        for entry in entries:
            if len(entry) != 1:
                raise ValueError(
                    f"each processor must be an object with exactly one key (its type), got {sorted(entry)}"
                )
        return entries

    @field_validator("answer")
    @classmethod
    def _answer_rules(cls, answer: dict[str, Any] | None) -> dict[str, Any] | None:
        if unknown := sorted(set(answer or ()) - set(ANSWER_RULES)):
            raise ValueError(f"the answer section takes {', '.join(ANSWER_RULES)}, not {', '.join(unknown)}")
        return answer

    @classmethod
    def parse(cls, raw: Any) -> PipelineDefinition:
        if not isinstance(raw, dict):
            raise ConfigError(f"a search pipeline must be a JSON object, got {type(raw).__name__}")
        try:
            return cls.model_validate(raw)
        except ValidationError as exc:
            raise ConfigError(f"invalid search pipeline: {validation_problems(exc)}") from exc

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True, exclude_defaults=True)

    def fingerprint(self) -> str:
        return json_digest(self.to_json())
