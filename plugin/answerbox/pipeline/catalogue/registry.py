"""Processor type name → class, and building a runnable ``Pipeline`` from a definition.

Building is async for one step: each processor's ``check``, what of its config may not be
checked on the event loop's own time (a prompt override's test render goes to the prompt
worker). A processor's constructor checks the rest, synchronously.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from answerbox.core.errors import ConfigError
from answerbox.pipeline.base import Processor, RequestProcessor, ResponseProcessor
from answerbox.pipeline.catalogue.definition import ANSWER_RULES, NATIVE_TYPES, PipelineDefinition, ProcessorEntry
from answerbox.pipeline.limits.request_limits import CallerLimits, ConfigContext
from answerbox.pipeline.run.pipeline import CONVERSATION, Pipeline
from answerbox.pipeline.run.stats import PipelineStats

if TYPE_CHECKING:
    from answerbox.services import Services

__all__ = ["ProcessorRegistry"]


class ProcessorRegistry:
    def __init__(self, processors: list[type[Processor[Any]]] | None = None) -> None:
        self._types: dict[str, type[Processor[Any]]] = {}
        # The defaults' conversation processor, built once for the services it was built with:
        # every pipeline without its own shares it (it holds no state of a search).
        self._default_conversation: tuple[Services, RequestProcessor[Any] | None] | None = None
        for cls in processors or []:
            self.register(cls)

    def register(self, cls: type[Processor[Any]]) -> None:
        self._types[cls.type_name] = cls

    def types(self) -> list[type[Processor[Any]]]:
        """The registered processor types, in registration order (``answerbox.ops.reference``)."""
        return list(self._types.values())

    async def build(
        self,
        pipeline_id: str,
        definition: PipelineDefinition,
        services: Services,
        stats: PipelineStats,
        *,
        inline: bool,
    ) -> Pipeline:
        limits = CallerLimits(services.settings)
        limits.check_pipeline(pipeline_id, definition)
        context = limits.config_context(inline=inline)
        native: dict[str, list[ProcessorEntry]] = {}
        request: list[RequestProcessor[Any]] = []
        response: list[ResponseProcessor[Any]] = []
        rules = self._answer_rules(pipeline_id, definition)
        for section, target, base in (
            ("request_processors", request, RequestProcessor),
            ("response_processors", response, ResponseProcessor),
            ("phase_results_processors", None, None),
        ):
            for entry in getattr(definition, section):
                ((type_name, config),) = entry.items()
                cls = self._types.get(type_name)
                if cls is None:
                    if type_name not in NATIVE_TYPES[section]:
                        raise ConfigError(
                            f"Invalid processor type [{type_name}] in {section} of pipeline [{pipeline_id}]"
                        )
                    native.setdefault(section, []).append(entry)
                    continue
                if target is None or base is None or not issubclass(cls, base):
                    raise ConfigError(
                        f"processor [{type_name}] cannot be used in {section} of pipeline [{pipeline_id}]"
                    )
                if cls.writes_answer and isinstance(config, dict):
                    config = {**config, **rules}
                target.append(cls.from_dict(config, services, context))  # type: ignore[arg-type]
        for processor in (*request, *response):
            try:
                await processor.check()
            except ConfigError as exc:
                raise ConfigError(f"processor [{processor.name}]: {exc.reason}") from exc
        return Pipeline(
            id=pipeline_id,
            request_processors=request,
            response_processors=response,
            native=PipelineDefinition(**native) if native else None,  # type: ignore[arg-type]
            stats=stats,
            timeout_s=services.settings.limits.processor_timeout_s,
            budget_s=definition.budget_s or services.settings.limits.pipeline_budget_s,
            budget_from_pipeline=definition.budget_s is not None,
            conversation=self._conversation(pipeline_id, request, services, context) if request or response else None,
        )

    def _answer_rules(self, pipeline_id: str, definition: PipelineDefinition) -> dict[str, Any]:
        """The answer's rules, one value each for every step that may answer: the pipeline's ``answer``
        section's, else the last that such a step sets (its own, as stored pipelines have them)."""
        writers = [
            config
            for entry in definition.response_processors
            for name, config in entry.items()
            if (cls := self._types.get(name)) is not None and cls.writes_answer and isinstance(config, dict)
        ]
        if definition.answer and not writers:
            raise ConfigError(f"pipeline [{pipeline_id}]: an answer section needs a step that answers")
        own = {name: config[name] for config in writers for name in ANSWER_RULES if name in config}
        return own | (definition.answer or {})

    def _conversation(
        self, pipeline_id: str, request: list[RequestProcessor[Any]], services: Services, context: ConfigContext
    ) -> RequestProcessor[Any] | None:
        """The pipeline's ``conversation`` processor, which must come first (a follow-up must be
        standalone before anything reads it), or one with the defaults."""
        declared = [p for p in request if p.type_name == CONVERSATION]
        if declared:
            if request[0] is not declared[0] or len(declared) > 1:
                raise ConfigError(
                    f"pipeline [{pipeline_id}]: [{CONVERSATION}] must be the first request processor, and the only one"
                )
            return declared[0]
        if self._default_conversation is None or self._default_conversation[0] is not services:
            cls = self._types.get(CONVERSATION)
            default = cls.from_dict({}, services, context) if cls is not None else None
            self._default_conversation = (services, default if isinstance(default, RequestProcessor) else None)
        return self._default_conversation[1]
