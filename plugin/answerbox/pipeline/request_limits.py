"""The limits a caller's search must keep before answerbox runs it (``limits.*``, ``llm.allowed_models``):
how many hits, how long a question, what ``ext.generative_qa_parameters`` may ask. One place checks them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from answerbox.config import Settings
from answerbox.contract import GenerativeQAParameters
from answerbox.errors import InvalidRequest, validation_problems
from answerbox.pipeline.base import JSON, SearchRequest
from answerbox.pipeline.pipeline import Pipeline
from answerbox.query_text import question_of

__all__ = ["RequestLimits"]

# What a memory_id may look like: OpenSearch's ids are far shorter; control characters never.
_MAX_MEMORY_ID = 512


class RequestLimits:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def check_size(self, body: JSON, params: Mapping[str, str]) -> None:
        """``from`` + ``size`` within ``limits.max_search_size``: answerbox reads every hit it asks for."""
        most = self._settings.limits.max_search_size
        asked = 0
        for name, default in (("from", 0), ("size", 10)):
            value: Any = params.get(name, body.get(name, default))
            try:
                asked += max(int(value), 0)
            except (TypeError, ValueError):
                return  # OpenSearch's own error says what is wrong with it
        if asked > most:
            raise InvalidRequest(
                f"[from] + [size] is {asked}, above limits.max_search_size ({most}) "
                "for a search pipeline answerbox runs"
            )

    def question(self, request: SearchRequest) -> str | None:
        """The question the run reads, within ``limits.max_question_chars``: the reader's, the
        encoder's and the LLM's time grow with it, and the caches keep every one they see."""
        question = question_of(request.body, request.params)
        most = self._settings.limits.max_question_chars
        if question is not None and len(question) > most:
            raise InvalidRequest(
                f"the search's question is {len(question)} characters long, above limits.max_question_chars ({most})"
            )
        return question

    def generative_qa(self, pipeline: Pipeline, body: JSON) -> GenerativeQAParameters | None:
        """``ext.generative_qa_parameters``, validated against the configured limits."""
        ext = body.get("ext")
        raw = ext.get("generative_qa_parameters") if isinstance(ext, dict) else None
        if raw is None:
            return None
        try:
            qa = GenerativeQAParameters.model_validate(raw)
        except ValidationError as exc:
            raise InvalidRequest(f"invalid ext.generative_qa_parameters: {validation_problems(exc)}") from exc
        limits, settings = self._settings.limits, self._settings
        for name in ("llm_question", "system_prompt", "user_instructions"):
            if len(getattr(qa, name) or "") > limits.max_prompt_chars:
                raise InvalidRequest(
                    f"ext.generative_qa_parameters.{name} is longer than limits.max_prompt_chars "
                    f"({limits.max_prompt_chars})"
                )
        for name, limit in (("context_size", limits.max_context_size), ("message_size", limits.max_message_size)):
            if (getattr(qa, name) or 0) > limit:
                raise InvalidRequest(f"ext.generative_qa_parameters.{name} is above limits.max_{name} ({limit})")
        if qa.llm_model is not None and qa.llm_model not in (settings.llm.model, *settings.llm.allowed_models):
            raise InvalidRequest(
                f"ext.generative_qa_parameters.llm_model [{qa.llm_model}] is not one callers may choose "
                f"(llm.allowed_models)"
            )
        if qa.memory_id is not None and not (0 < len(qa.memory_id) <= _MAX_MEMORY_ID and qa.memory_id.isprintable()):
            raise InvalidRequest(
                f"ext.generative_qa_parameters.memory_id must be 1 to {_MAX_MEMORY_ID} printable characters"
            )
        if qa.llm_response_field and not pipeline.native_rag:
            # It names a field of OpenSearch's RAG processor's LLM reply; answerbox's answers have
            # their own shape, and a parameter accepted and ignored would seem honoured.
            raise InvalidRequest(
                "llm_response_field needs OpenSearch's retrieval_augmented_generation processor in the pipeline"
            )
        return qa
