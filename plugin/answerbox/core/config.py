"""One validated configuration object: a YAML file, then ``ANSWERBOX_*`` environment variables.

Nested fields use ``__`` in the environment: ``ANSWERBOX_OPENSEARCH__URL``,
``ANSWERBOX_LLM__BASE_URL``, ``ANSWERBOX_MODELS__VARIANT``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from answerbox.core.shipped import shipped

__all__ = ["LLMSettings", "Limits", "MemorySettings", "ModelSettings", "OpenSearchSettings", "Settings"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class OpenSearchSettings(_Section):
    url: str = "http://127.0.0.1:9200"
    verify_certs: bool = True
    ca_certs: Path | None = None
    # Used only for answerbox's own indices (pipelines, the shared cache) and to read index
    # settings; searches always run with the caller's own Authorization header.
    service_username: str | None = None
    service_password: SecretStr | None = None
    pipeline_index: str = ".answerbox-pipelines"
    # Where processors with ``shared_cache`` keep results for every replica (LLM expansions).
    cache_index: str = ".answerbox-cache"
    # The wait for a free pooled connection and the connect together: past it, a 504.
    connect_timeout_s: float = Field(default=5.0, gt=0)
    request_timeout_s: float = Field(default=60.0, gt=0)
    max_connections: int = Field(default=100, ge=1)
    default_pipeline_cache_s: float = Field(default=5.0, ge=0)

    @field_validator("url")
    @classmethod
    def _strip_slash(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"opensearch.url must start with http:// or https://, got {value!r}")
        return value.rstrip("/")


class LLMSettings(_Section):
    # None means no LLM is configured: processors degrade to their non-LLM paths.
    base_url: str | None = None
    api_key: SecretStr = SecretStr("not-needed")
    model: str = "smollm2"
    # Models a search may ask for (ext.generative_qa_parameters.llm_model) besides ``model``:
    # each costs what its endpoint charges, so callers get none unless the admin lists them.
    allowed_models: list[str] = []
    temperature: float = Field(default=0.0, ge=0, le=2)
    max_tokens: int = Field(default=256, ge=1)
    timeout_s: float = Field(default=20.0, gt=0)
    # Calls in flight at once, over all searches, and of one caller (one set of credentials);
    # more wait for a slot within their own timeout.
    max_concurrent: int = Field(default=8, ge=1)
    max_concurrent_per_caller: int = Field(default=4, ge=1)
    # How the endpoint takes a JSON schema for replies that have structure (chains, keywords,
    # cited sentences): json_schema (OpenAI, vLLM), json_object with a schema (llama-cpp-python),
    # none (free text only); auto asks the endpoint once, the first time structure is wanted.
    structured_output: Literal["auto", "json_schema", "json_object", "none"] = "auto"


class ModelSettings(_Section):
    dir: Path = Field(default_factory=lambda: shipped("model"))
    # The claim verifier (``models/verifier.py``); a folder without a model: citations are
    # checked by the evaluator's score and shared words, as before the verifier.
    verifier_dir: Path = Field(default_factory=lambda: shipped("verifier"))
    variant: Literal["int8", "fp32", "fp16"] = "int8"
    providers: list[str] = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    max_batch: int = Field(default=16, ge=1)
    # How long a model call waits for others to share its batch. None: not at all on the CPU,
    # where a batch costs about what its windows cost one by one and the wait is pure latency
    # (onnx_models/LOG.md); 4 ms on a GPU, where a batch costs about what one window does.
    max_wait_ms: float | None = Field(default=None, ge=0)
    # 16 windows of 192 tokens cover ~10,000 characters, far more than a search hit's text.
    max_windows_per_passage: int = Field(default=16, ge=1)
    intra_op_threads: int = Field(default=0, ge=0)


class MemorySettings(_Section):
    """Conversational memory (``/_plugins/_ml/memory``, ``generative_qa_parameters.memory_id``)."""

    # ml_commons: the cluster keeps memories (the API passes through); answerbox: answerbox
    # keeps them in ``index``; auto: ml_commons where the cluster runs the plugin, asked once.
    backend: Literal["auto", "ml_commons", "answerbox"] = "auto"
    index: str = ".answerbox-memory"


class Limits(_Section):
    max_request_bytes: int = Field(default=10 * 1024 * 1024, ge=1024)
    max_hits_processed: int = Field(default=50, ge=1)
    processor_timeout_s: float = Field(default=30.0, gt=0)
    # A search's time for all its processors together, shared out by the engine; a pipeline's
    # own budget_s may be shorter, never longer.
    pipeline_budget_s: float = Field(default=60.0, gt=0)
    # What one caller may ask for: each is answered with a 400 when exceeded.
    max_processors: int = Field(default=16, ge=1)  # per pipeline, both phases together
    max_msearch_searches: int = Field(default=100, ge=1)
    max_prompt_chars: int = Field(default=4000, ge=1)  # llm_question, system_prompt, user_instructions
    # The question a pipeline reads (llm_question, else the first query text, else ``q``): the
    # models' time and the caches' memory grow with it.
    max_question_chars: int = Field(default=4000, ge=1)
    max_context_size: int = Field(default=20, ge=1)  # generative_qa_parameters.context_size
    max_message_size: int = Field(default=50, ge=1)  # generative_qa_parameters.message_size
    max_llm_tokens: int = Field(default=1024, ge=1)  # any processor's max_tokens
    # Admission (pipeline/limits/admission.py): runs in flight at once, in all and per caller; past
    # either, a 429. And the LLM calls one request (a search, an _msearch, a stream) may make.
    max_concurrent_runs: int = Field(default=64, ge=1)
    max_runs_per_caller: int = Field(default=16, ge=1)
    max_llm_calls: int = Field(default=64, ge=1)
    # CPU seconds all of one request's prompt renders may take together (one takes at most 0.2).
    render_budget_s: float = Field(default=1.0, gt=0)
    # The most hits (from + size) a search answerbox runs may ask OpenSearch for.
    max_search_size: int = Field(default=1000, ge=1)
    # How long a request may take to send its body (a body streamed on: each part of it), and a
    # caller to take each part of a streamed answer; past it the exchange is dropped.
    body_timeout_s: float = Field(default=30.0, gt=0)
    # Connections open at once (past it uvicorn answers 503), an idle keep-alive's life, and the
    # time a request's headers may take from the connection's opening (or the request's first
    # byte): past it the connection is closed, so idle or trickling sockets cannot fill the limit.
    max_connections: int = Field(default=1000, ge=1)
    keep_alive_s: int = Field(default=5, ge=1)
    header_timeout_s: float = Field(default=10.0, gt=0)
    # Whether a search's own (inline) pipeline may set prompt templates, few-shot examples and
    # the LLM model, as a stored one may: off, so that a caller who may only search cannot
    # turn the operator's LLM into a general one, nor run template code on the server.
    inline_overrides: bool = False


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ANSWERBOX_", env_nested_delimiter="__", extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=9400, ge=0, le=65535)
    templates_dir: Path = Field(default_factory=lambda: shipped("templates"))
    # The only folder a stored pipeline may name files in (few-shot examples_file); unset: none.
    files_dir: Path | None = None
    opensearch: OpenSearchSettings = OpenSearchSettings()
    llm: LLMSettings = LLMSettings()
    models: ModelSettings = ModelSettings()
    memory: MemorySettings = MemorySettings()
    limits: Limits = Limits()

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The environment overrides the file, which arrives as init arguments.
        return env_settings, init_settings

    @classmethod
    def load(cls, path: Path | None = None, **overrides: Any) -> Settings:
        """Read ``path`` (or ``$ANSWERBOX_CONFIG``) as YAML, then apply the environment."""
        path = path or (Path(os.environ["ANSWERBOX_CONFIG"]) if os.environ.get("ANSWERBOX_CONFIG") else None)
        data = (yaml.safe_load(path.read_text()) or {}) if path is not None else {}
        if not isinstance(data, dict):
            raise ValueError(f"{path}: the configuration file must hold a mapping, got {type(data).__name__}")
        return cls(**{**data, **overrides})
