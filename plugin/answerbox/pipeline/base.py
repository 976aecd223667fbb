"""What every processor is built from: its config, the request it sees, and the run's context.

A processor is a small class with a validated pydantic config and one async entry point:
``process_request`` (request processors) or ``process_response`` (response processors).
It does no I/O in ``__init__``; what it needs (LLM, models, OpenSearch) comes from
``Services``, shared by every pipeline of the app.
"""

from __future__ import annotations

import marshal
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
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
from answerbox.pipeline.caller_scope.scope import ScopedSearch
from answerbox.pipeline.limits.request_limits import ConfigContext
from answerbox.pipeline.run.deadline import Deadline
from answerbox.pipeline.run.hits_asked import PLAIN_SEARCH, HitsAsked

if TYPE_CHECKING:
    from answerbox.services import Services

__all__ = [
    "JSON",
    "PipelineContext",
    "Planning",
    "Processor",
    "ProcessorConfig",
    "RequestProcessor",
    "ResponseProcessor",
    "RunListener",
    "SearchRequest",
    "Sourced",
    "StepPlan",
    "first_set",
]

V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class Sourced(Generic[V]):
    """One value a step runs with, and where it came from (the run plan shows both)."""

    value: V
    source: PlanSource


@dataclass(frozen=True, slots=True, kw_only=True)
class StepPlan:
    """What a step runs with, resolved once when the search opens (``pipeline/run/plan.py``). A
    processor's plan adds its values as ``Sourced`` fields (None: not part of this run); the run
    plan shows them, and the step reads nothing else that the settings, the model or the search decide."""

    # Why the search makes the step pointless: then it does not run.
    skipped: str | None = None

    def values(self) -> dict[str, Planned]:
        found = ((f.name, getattr(self, f.name)) for f in fields(self))
        return {name: Planned(value=v.value, source=v.source) for name, v in found if isinstance(v, Sourced)}


P = TypeVar("P", bound=StepPlan)


def first_set(*candidates: tuple[V | None, PlanSource]) -> Sourced[V]:
    """The first of ``candidates`` whose value is set, with its source: the one precedence of
    every value a search may override (the search's, then the pipeline's, then the settings')."""
    for value, source in candidates:
        if value is not None and value != "":
            return Sourced(value, source)
    raise ValueError("no candidate is set: the last must be a setting's value")


class ProcessorConfig(BaseModel):
    """Fields every processor accepts, as in OpenSearch."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tag: str | None = None
    description: str | None = None
    ignore_failure: bool = False

    def sourced(self, name: str, value: V, otherwise: PlanSource = "default") -> Sourced[V]:
        """``value``, what field ``name`` came to: the pipeline's where it set the field (not None),
        else from ``otherwise`` (the manifest, for a field whose None means the model's)."""
        given = name in self.model_fields_set and getattr(self, name) is not None
        return Sourced(value, "pipeline" if given else otherwise)


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
    # Each step's plan (``pipeline/run/plan.py``), resolved when the search opened.
    plans: dict[Processor[Any], StepPlan] = field(default_factory=dict)

    def plan(self, processor: Processor[Any], kind: type[P]) -> P:
        """The plan ``processor`` runs with: the one place a step reads what the settings, the
        model, the pipeline or the search decide."""
        plan = self.plans[processor]
        if not isinstance(plan, kind):
            raise TypeError(f"[{processor.name}] has a {type(plan).__name__}, not a {kind.__name__}")
        return plan


@dataclass(frozen=True, kw_only=True)
class Planning:
    """What a step's plan is resolved from besides its config, the settings and the model."""

    qa: GenerativeQAParameters | None = None  # the search's generative_qa_parameters
    asked: HitsAsked = PLAIN_SEARCH  # what the search asks of its hits (none: a plain search)
    later: Sequence[tuple[Processor[Any], StepPlan]] = ()  # the steps after it, with their plans
    answers: bool = False  # whether it writes the search's answer


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

    async def plan(self, planning: Planning) -> StepPlan:
        """What it runs with, each value with where it came from (``pipeline/run/plan.py``)."""
        return StepPlan()

    def writes_from_knowledge(self, plan: StepPlan) -> bool:
        """Whether, run with ``plan``, it may give an LLM the knowledge earlier steps kept (CRAG's
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
