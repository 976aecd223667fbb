"""What every processor is built from: its config, the request it sees, and the run's context.

A processor is a small class with a validated pydantic config and one async entry point:
``process_request`` (request processors) or ``process_response`` (response processors).
It does no I/O in ``__init__``; what it needs (LLM, models, OpenSearch) comes from
``Services``, shared by every pipeline of the app.
"""

from __future__ import annotations

import marshal
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from answerbox.core.contract import (
    Answer,
    AnswerboxReport,
    CheckedSentence,
    GenerativeQAParameters,
    Planned,
    PlanSource,
)
from answerbox.core.errors import AnswerboxError, ConfigError, validation_problems
from answerbox.memory.turn import ConversationTurn
from answerbox.opensearch import JSON, Caller
from answerbox.pipeline.caller_limits import ConfigContext
from answerbox.pipeline.deadline import Deadline
from answerbox.pipeline.scope import ScopedSearch

if TYPE_CHECKING:
    from answerbox.services import Services

__all__ = [
    "JSON",
    "PipelineContext",
    "Processor",
    "ProcessorConfig",
    "RequestProcessor",
    "ResponseProcessor",
    "RunListener",
    "SearchRequest",
    "first_set",
]


def first_set(*candidates: tuple[Any, PlanSource]) -> Planned:
    """The first of ``candidates`` whose value is set, with its source: the one precedence of
    every value a search may override (the search's, then the pipeline's, then the settings')."""
    for value, source in candidates:
        if value is not None and value != "":
            return Planned(value=value, source=source)
    raise ValueError("no candidate is set: the last must be a setting's value")


class ProcessorConfig(BaseModel):
    """Fields every processor accepts, as in OpenSearch."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tag: str | None = None
    description: str | None = None
    ignore_failure: bool = False

    def planned(self, name: str) -> Planned:
        """Field ``name`` for the run plan: from the pipeline where it set the field, else the default."""
        return Planned(value=getattr(self, name), source="pipeline" if name in self.model_fields_set else "default")

    def planned_as(self, name: str, resolved: Any, otherwise: PlanSource) -> Planned:
        """``resolved``, the value field ``name`` came to: the pipeline's where it set one (not
        None), else from ``otherwise`` (the manifest, for a field whose None means the model's)."""
        return Planned(value=resolved, source="pipeline" if getattr(self, name) is not None else otherwise)


@dataclass(kw_only=True)
class SearchRequest:
    """One search as OpenSearch will receive it: target, body and query parameters."""

    index: str | None
    body: JSON
    params: dict[str, str]
    caller: Caller

    def copy(self) -> SearchRequest:
        return SearchRequest(index=self.index, body=_json_copy(self.body), params=dict(self.params), caller=self.caller)


def _json_copy(value: Any) -> Any:
    """A copy of parsed JSON, through marshal (C throughout): a third of ``copy.deepcopy``'s time,
    whose memo and dispatch cost a body of 100,000 values (``MAX_JSON_VALUES``) 150 ms on the loop."""
    return marshal.loads(marshal.dumps(value))


class RunListener(Protocol):
    """Who watches a run as it goes (the stream endpoint): told of each phase as it ends."""

    def searched(self, response: JSON) -> None:
        """OpenSearch answered; no response processor has run yet."""

    def ranked(self, response: JSON) -> None:
        """Every response processor before the answer's has run (``response`` is rendered)."""

    def snippet(self, answer: Answer) -> None:
        """The reader's answer, scored, before any LLM is asked."""

    def sentence(self, sentence: CheckedSentence) -> None:
        """A sentence of the answer's LLM held up against its citations."""

    def failed(self, error: AnswerboxError) -> None:
        """Something failed that the answer degrades around."""


@dataclass(kw_only=True)
class PipelineContext:
    """Per-search state shared by the processors of one pipeline run."""

    pipeline_id: str
    question: str | None
    # Every search a processor sends goes through this: the caller's scope cannot be forgotten.
    search: ScopedSearch
    generative_qa: GenerativeQAParameters | None = None
    # With ``memory_id``: the conversation so far, read before the request processors run.
    conversation: ConversationTurn | None = None
    report: AnswerboxReport = field(default_factory=AnswerboxReport)
    processor_results: list[JSON] = field(default_factory=list)
    # The search's time: the running processor's share and every part of it (deadline.py).
    deadline: Deadline = field(default_factory=Deadline)
    listener: RunListener | None = None
    # Each step's values in the run plan (``pipeline/plan.py``), resolved when the search opened.
    planned_values: dict[Processor[Any], dict[str, Planned]] = field(default_factory=dict)

    def planned(self, processor: Processor[Any], name: str) -> Any:
        """The value ``processor`` runs with for ``name``, as the run plan resolved it: the one
        place a step reads what the settings, the manifest or the search may decide."""
        return self.planned_values[processor][name].value


C = TypeVar("C", bound=ProcessorConfig)


class Processor(ABC, Generic[C]):
    """Base of all answerbox processors; ``type_name`` is the key used in pipeline JSON."""

    type_name: ClassVar[str]
    config_model: ClassVar[type[ProcessorConfig]]
    # Its claim on the pipeline's time budget, relative to the processors after it.
    budget_weight: ClassVar[float] = 1.0
    # Whether it writes the answer: a stream sends the ranked hits before it runs.
    writes_answer: ClassVar[bool] = False
    # Whether it runs the reader or the evaluator: warming it up loads them.
    uses_models: ClassVar[bool] = False

    def __init__(self, config: C, services: Services) -> None:
        self.config = config
        self.services = services

    @classmethod
    def from_dict(cls, raw: Any, services: Services, context: ConfigContext) -> Processor[Any]:
        if not isinstance(raw, dict):
            raise ConfigError(f"processor [{cls.type_name}] config must be an object, got {type(raw).__name__}")
        try:
            config = cls.config_model.model_validate(raw, context=context)
        except ValidationError as exc:
            tag = raw.get("tag")
            problems = validation_problems(exc, show_input=True)
            raise ConfigError(f"processor [{cls.type_name}]{f' tag [{tag}]' if tag else ''}: {problems}") from exc
        return cls(config, services)  # type: ignore[arg-type]  # config_model is C for each subclass

    @property
    def name(self) -> str:
        return f"{self.type_name}:{self.config.tag}" if self.config.tag else self.type_name

    def warn(self, ctx: PipelineContext, message: str) -> None:
        """A degradation this processor worked around, in ``ext.answerbox.warnings`` as ``[name] message``."""
        ctx.report.warn(f"[{self.name}] {message}")

    async def planned(self, qa: GenerativeQAParameters | None) -> dict[str, Planned]:
        """The values that decide what it does, each with where it came from, for the run plan
        (``pipeline/plan.py``); ``qa`` is the search's ``generative_qa_parameters``."""
        return {}

    def planned_after(self, later: Sequence[tuple[Processor[Any], Mapping[str, Planned]]]) -> dict[str, Planned]:
        """Values that depend on the steps after it in the pipeline (``later``: each with its own
        planned values), for the run plan; most steps have none."""
        return {}

    def writes_from_knowledge(self, values: Mapping[str, Planned]) -> bool:
        """Whether, run with ``values``, it may give an LLM the knowledge earlier steps kept (CRAG's
        strips) to write from. A step that does not say may: the strips stay CRAG's."""
        return True

    async def check(self) -> None:
        """What of its config is checked when the pipeline is built but must not hold up the event
        loop: a prompt override's test render, in the prompt worker. Raises ConfigError."""

    async def warm_up(self) -> None:
        """Load what it runs on before any search's time starts (``Pipeline.warm_up``)."""
        if self.uses_models:
            await self.services.models()


class RequestProcessor(Processor[C]):
    @abstractmethod
    async def process_request(self, request: SearchRequest, ctx: PipelineContext) -> SearchRequest:
        """Return the request to send on (a changed copy, or ``request`` itself)."""


class ResponseProcessor(Processor[C]):
    @abstractmethod
    async def process_response(self, request: SearchRequest, response: JSON, ctx: PipelineContext) -> JSON:
        """Return the response to pass on; enrichments go to ``ctx.report``."""
