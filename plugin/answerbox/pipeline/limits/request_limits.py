"""Every limit a caller is held to, in one place: what a pipeline's processors may set
(``ConfigContext`` and the field types that read it: ``Override``, ``StoredOnly``, ``LLMModel``,
``LLMTokens``, ``BelowProcessorTimeout``), how big a pipeline may be, and what a search may ask
before answerbox runs it (``CallerLimits``: hits, question length, ``_msearch`` lines,
``ext.generative_qa_parameters``). The settings they come from are ``limits.*`` and
``llm.allowed_models``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, ValidationError, ValidationInfo

from answerbox.core.config import Settings
from answerbox.core.contract import GenerativeQAParameters
from answerbox.core.errors import ConfigError, InvalidRequest, validation_problems
from answerbox.core.query_text import question_of
from answerbox.opensearch import JSON
from answerbox.pipeline.catalogue.definition import NATIVE_TYPES, PipelineDefinition

__all__ = ["BelowProcessorTimeout", "CallerLimits", "ConfigContext", "LLMModel", "LLMTokens", "Override", "StoredOnly"]

T = TypeVar("T")

# What a memory_id may look like: OpenSearch's ids are far shorter; control characters never.
_MAX_MEMORY_ID = 512


def _models(settings: Settings) -> frozenset[str]:
    """The models a pipeline or a search may name: llm.model and llm.allowed_models."""
    return frozenset((settings.llm.model, *settings.llm.allowed_models))


@dataclass(frozen=True, slots=True)
class ConfigContext:
    """What a config may need beyond its own fields, given to its validators."""

    # Where a stored pipeline's files (few-shot examples) may be read from; None: nowhere.
    files_dir: Path | None = None
    # A search's own pipeline object: it names no files on the server at all.
    inline: bool = False
    # The most completion tokens any processor may ask the LLM for (limits.max_llm_tokens).
    max_llm_tokens: int = 1024
    # Whether a search's own pipeline may set what shapes the LLM's work: prompt templates,
    # few-shot examples, the model (limits.inline_overrides). A stored pipeline always may.
    inline_overrides: bool = False
    # The models any pipeline may name (llm.model and llm.allowed_models); None: not checked.
    llm_models: frozenset[str] | None = None
    # A processor's own time limit must stay below the engine's (limits.processor_timeout_s):
    # past it the whole search fails instead of the processor falling back.
    processor_timeout_s: float = float("inf")

    @property
    def overrides_allowed(self) -> bool:
        return not self.inline or self.inline_overrides


def _override(value: Any, info: ValidationInfo) -> Any:
    if value and isinstance(info.context, ConfigContext) and not info.context.overrides_allowed:
        raise ValueError(
            "a search's own pipeline may not set it; store the pipeline (limits.inline_overrides allows it)"
        )
    return value


def _stored_only(value: Any, info: ValidationInfo) -> Any:
    if value and isinstance(info.context, ConfigContext) and info.context.inline:
        raise ValueError("a search's own pipeline may not set it; store the pipeline")
    return value


def _allowed_model(value: str | None, info: ValidationInfo) -> str | None:
    context = info.context
    if value is not None and isinstance(context, ConfigContext):
        _override(value, info)
        if context.llm_models is not None and value not in context.llm_models:
            raise ValueError(f"model [{value}] is not one pipelines may name (llm.model, llm.allowed_models)")
    return value


# What shapes the LLM's work (a template's text, few-shot examples): a stored pipeline may set
# it, a search's own pipeline only where the admin allows; otherwise a caller who may only
# search gets the prompts the admin chose.
Override = Annotated[T, AfterValidator(_override)]
# What only a stored pipeline may set, whatever the settings: what writes with the service account.
StoredOnly = Annotated[T, AfterValidator(_stored_only)]
# A processor's LLM model: one the admin allows, and an override like a template.
LLMModel = Annotated[str | None, AfterValidator(_allowed_model)]


def _within_token_limit(value: int, info: ValidationInfo) -> int:
    if isinstance(info.context, ConfigContext) and value > info.context.max_llm_tokens:
        raise ValueError(f"max_tokens {value} is above limits.max_llm_tokens ({info.context.max_llm_tokens})")
    return value


def _below_processor_timeout(value: float, info: ValidationInfo) -> float:
    most = info.context.processor_timeout_s if isinstance(info.context, ConfigContext) else float("inf")
    if value >= most:
        raise ValueError(f"must be below limits.processor_timeout_s ({most:g})")
    return value


# A processor's own time limit, within which it falls back rather than fail the search.
BelowProcessorTimeout = Annotated[float, AfterValidator(_below_processor_timeout)]
# A processor's max_tokens: checked against the configured limit when a pipeline is built.
LLMTokens = Annotated[int, AfterValidator(_within_token_limit)]


class CallerLimits:
    """The configured limits, checked where a pipeline is built and where a search opens."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def config_context(self, *, inline: bool) -> ConfigContext:
        """What a pipeline's processor configs are validated against (a search's own: ``inline``)."""
        settings = self._settings
        return ConfigContext(
            files_dir=settings.files_dir,
            inline=inline,
            max_llm_tokens=settings.limits.max_llm_tokens,
            inline_overrides=settings.limits.inline_overrides,
            llm_models=_models(settings),
            processor_timeout_s=settings.limits.processor_timeout_s,
        )

    def check_pipeline(self, pipeline_id: str, definition: PipelineDefinition) -> None:
        """How many processors, and how long a budget, a pipeline may have."""
        limits = self._settings.limits
        count = sum(len(getattr(definition, section)) for section in NATIVE_TYPES)
        if count > limits.max_processors:
            raise ConfigError(
                f"pipeline [{pipeline_id}] has {count} processors, above limits.max_processors "
                f"({limits.max_processors})"
            )
        if definition.budget_s is not None and definition.budget_s > limits.pipeline_budget_s:
            raise ConfigError(
                f"pipeline [{pipeline_id}]: [budget_s] {definition.budget_s:g} is above "
                f"limits.pipeline_budget_s ({limits.pipeline_budget_s:g})"
            )

    def check_msearch(self, searches: int) -> None:
        most = self._settings.limits.max_msearch_searches
        if searches > most:
            raise InvalidRequest(f"_msearch holds {searches} searches, above limits.max_msearch_searches ({most})")

    def check_size(self, window: int | None) -> None:
        """``from`` + ``size`` (``window``; None: not numbers, which OpenSearch's own error says)
        within ``limits.max_search_size``: answerbox reads every hit it asks for."""
        most = self._settings.limits.max_search_size
        if window is not None and window > most:
            raise InvalidRequest(
                f"[from] + [size] is {window}, above limits.max_search_size ({most}) "
                "for a search pipeline answerbox runs"
            )

    def question(self, body: JSON, params: Mapping[str, str]) -> str | None:
        """The question the run reads, within ``limits.max_question_chars``: the reader's, the
        encoder's and the LLM's time grow with it, and the caches keep every one they see."""
        question = question_of(body, params)
        most = self._settings.limits.max_question_chars
        if question is not None and len(question) > most:
            raise InvalidRequest(
                f"the search's question is {len(question)} characters long, above limits.max_question_chars ({most})"
            )
        return question

    def generative_qa(self, body: JSON, *, native_rag: bool) -> GenerativeQAParameters | None:
        """``ext.generative_qa_parameters``, validated against the configured limits (``native_rag``:
        the pipeline holds OpenSearch's retrieval_augmented_generation processor)."""
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
        if qa.llm_model is not None and qa.llm_model not in _models(settings):
            raise InvalidRequest(
                f"ext.generative_qa_parameters.llm_model [{qa.llm_model}] is not one callers may choose "
                f"(llm.allowed_models)"
            )
        if qa.memory_id is not None and not (0 < len(qa.memory_id) <= _MAX_MEMORY_ID and qa.memory_id.isprintable()):
            raise InvalidRequest(
                f"ext.generative_qa_parameters.memory_id must be 1 to {_MAX_MEMORY_ID} printable characters"
            )
        if qa.llm_response_field and not native_rag:
            # It names a field of OpenSearch's RAG processor's LLM reply; answerbox's answers have
            # their own shape, and a parameter accepted and ignored would seem honoured.
            raise InvalidRequest(
                "llm_response_field needs OpenSearch's retrieval_augmented_generation processor in the pipeline"
            )
        return qa if native_rag else _in_the_user_message(qa)


def _in_the_user_message(qa: GenerativeQAParameters) -> GenerativeQAParameters:
    """The caller's ``system_prompt`` joins its ``user_instructions``: any caller may send it,
    and text in the system role outranks the operator's rules with many models, quoted or not.
    (OpenSearch's own RAG processor reads the body's parameters, untouched by this.)"""
    if qa.system_prompt is None:
        return qa
    joined = "\n".join(text for text in (qa.system_prompt, qa.user_instructions) if text)
    return qa.model_copy(update={"system_prompt": None, "user_instructions": joined or None})
