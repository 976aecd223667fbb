"""A search through a pipeline, end to end: the engine's one path.

    resolve → request processors → the upstream form → OpenSearch (caller's credentials)
            → response processors → the response with ``ext.answerbox``

``SearchEngine.open`` resolves a search's pipeline and gives its run (or None: not ours),
``SearchEngine.run`` runs it once admitted; ``msearch_lines`` and ``msearch`` do the same
for each line of an ``_msearch`` (one upstream ``_msearch`` for all lines), and a stream is
the same run with a ``RunListener`` told of each phase as it ends. ``http/`` parses, calls
this, and writes what comes back.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from answerbox.config import Settings
from answerbox.contract import ConversationReport, GenerativeQAParameters
from answerbox.errors import AnswerboxError, InvalidRequest, validation_problems
from answerbox.memory import Memory
from answerbox.memory.turn import ConversationTurn, interaction
from answerbox.opensearch import Caller, SearchBackend, with_pipeline
from answerbox.pipeline.admission import Admission, caller_key
from answerbox.pipeline.base import JSON, PipelineContext, RunListener, SearchRequest
from answerbox.pipeline.deadline import Deadline
from answerbox.pipeline.pipeline import Pipeline
from answerbox.pipeline.resolver import PipelineResolver
from answerbox.pipeline.scope import SCOPE_PARAMS, ScopedSearch, SearchScope
from answerbox.query_text import question_of

__all__ = ["MsearchLine", "SearchEngine", "SearchRun"]

# Parameters answerbox consumes; OpenSearch must not see them once a pipeline ran here.
_OWN_PARAMS = ("search_pipeline", "verbose_pipeline")
# ext keys answerbox owns; OpenSearch rejects ext keys no plugin registered.
_OWN_EXT = ("answerbox", "generative_qa_parameters")
# Earlier interactions a follow-up is read against when the search names no message_size
# (OpenSearch's RAG processor's default).
_MESSAGE_SIZE = 10
# What a memory_id may look like: OpenSearch's ids are far shorter; control characters never.
_MAX_MEMORY_ID = 512


@dataclass(frozen=True, slots=True)
class MsearchLine:
    header: JSON
    body: JSON
    index: str | None  # the line's target, as OpenSearch reads it
    pipeline: Pipeline | None  # None: OpenSearch runs the line alone


class SearchRun:
    """One search's run through its pipeline; ``ctx`` holds its report and time."""

    def __init__(
        self,
        engine: SearchEngine,
        pipeline: Pipeline,
        request: SearchRequest,
        *,
        verbose: bool,
        listener: RunListener | None,
    ) -> None:
        self._engine = engine
        self.pipeline = pipeline
        self.request = request
        self.verbose = verbose
        qa = engine.generative_qa(pipeline, request.body)
        # answerbox keeps the conversation unless OpenSearch's own RAG processor does.
        turn = None
        if qa is not None and qa.memory_id is not None and not pipeline.native_rag:
            turn = ConversationTurn(memory_id=qa.memory_id, message_size=qa.message_size or _MESSAGE_SIZE)
            self.pipeline = pipeline.for_conversation()
        self.ctx = PipelineContext(
            pipeline_id=pipeline.id,
            question=engine.question(request),
            search=engine.scoped(pipeline, request),
            generative_qa=qa,
            conversation=turn,
            deadline=Deadline(engine.clock),
            listener=listener,
        )

    async def prepare(self) -> SearchRequest:
        """The request processors; returns the request in the form OpenSearch must receive."""
        await self._recall()
        self.request = await self.pipeline.process_request(self.request, self.ctx)
        # The response processors' own searches see what the search as sent sees.
        self.ctx.search = self._engine.scoped(self.pipeline, self.request)
        return self._upstream()

    async def respond(self, response: JSON, *, search_ms: float) -> JSON:
        """The response processors over OpenSearch's answer, then ``ext.answerbox``."""
        self.ctx.report.timings_ms["search"] = round(search_ms, 2)
        listener = self.ctx.listener
        if listener is not None:
            listener.searched(response)
        ranked = (lambda current: listener.ranked(self._rendered(current))) if listener is not None else None
        response = await self.pipeline.process_response(self.request, response, self.ctx, ranked=ranked)
        await self._remember()
        return self._rendered(response)

    async def _recall(self) -> None:
        """The conversation so far, before anything reads the question. A memory that is not the
        caller's (or not there) fails the search, as in OpenSearch: a 404."""
        turn = self.ctx.conversation
        if turn is None:
            return
        store = await self._engine.memory.store()
        turn.history = await store.history(self.request.caller, turn.memory_id, turn.message_size)
        question = self.ctx.question or ""
        self.ctx.report.conversation = ConversationReport(
            memory_id=turn.memory_id, question=question, standalone_question=question, history=len(turn.history)
        )

    async def _remember(self) -> None:
        """This turn into the memory, with the caller's credentials; a failure costs the
        conversation this turn (a warning), never the search's hits or answer."""
        turn, report = self.ctx.conversation, self.ctx.report.conversation
        if turn is None or report is None:
            return
        try:
            store = await self._engine.memory.store()
            stored = await store.add_message(
                self.request.caller, turn.memory_id, interaction(report, self.ctx.report.answer)
            )
        except AnswerboxError as exc:
            self.ctx.report.warn(f"this turn was not stored in memory [{turn.memory_id}]: {exc.reason}")
            return
        report.message_id = str(stored.get("message_id")) if stored.get("message_id") else None

    async def run(self) -> JSON:
        upstream = await self.prepare()
        started = self._engine.clock()
        response = await self._engine.backend.search(
            index=upstream.index, body=upstream.body, params=upstream.params, caller=upstream.caller
        )
        return await self.respond(response, search_ms=(self._engine.clock() - started) * 1000)

    def _upstream(self) -> SearchRequest:
        """Our parameters and ext keys removed, OpenSearch's own processors inline."""
        upstream = self.request.copy()
        upstream.body.pop("search_pipeline", None)
        for name in _OWN_PARAMS:
            upstream.params.pop(name, None)
        ext = upstream.body.get("ext")
        if isinstance(ext, dict):
            for key in _OWN_EXT:
                if not (key == "generative_qa_parameters" and self.pipeline.native_rag):
                    ext.pop(key, None)
            if not ext:
                upstream.body.pop("ext")
        # Inline even when empty: the index's default may name an answerbox pipeline OpenSearch does not know.
        upstream.body = with_pipeline(upstream.body, self.pipeline.inline_native)
        return upstream

    def report(self) -> JSON:
        """``ext.answerbox`` as it stands, with the time so far: the one place the report is rendered."""
        self.ctx.report.timings_ms["total"] = round(self.ctx.deadline.elapsed_ms(), 2)
        return self.ctx.report.render()

    def _rendered(self, response: JSON) -> JSON:
        """``response`` with the report in ``ext`` (a copy when a listener may still see changes)."""
        report = self.ctx.report
        if self.ctx.listener is not None:
            response = {**response}
        if self.pipeline.request_processors or self.pipeline.response_processors:
            ext = response["ext"] = {**response.get("ext", {})}
            ext["answerbox"] = self.report()
            rag = {"answer": report.answer.text} if report.answer is not None else {}
            if report.conversation is not None and report.conversation.message_id is not None:
                rag["message_id"] = report.conversation.message_id
            if rag:
                ext["retrieval_augmented_generation"] = rag
        if self.verbose:
            response["processor_results"] = self.ctx.processor_results + response.get("processor_results", [])
        return response


class SearchEngine:
    """Runs searches through their pipelines with the caller's credentials."""

    def __init__(
        self,
        *,
        resolver: PipelineResolver,
        backend: SearchBackend,
        memory: Memory,
        settings: Settings,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.resolver = resolver
        self.backend = backend
        self.memory = memory
        self._settings = settings
        self.clock = clock  # every run's Deadline reads it
        self.admission = Admission(settings.limits)

    async def open(
        self,
        *,
        index: str | None,
        body: JSON,
        params: Mapping[str, str],
        caller: Caller,
        listener: RunListener | None = None,
    ) -> SearchRun | None:
        """The search's run through the pipeline it names (or its index's default); None when no
        answerbox pipeline applies, and the search is OpenSearch's alone."""
        pipeline = await self.resolver.resolve(index, body, dict(params))
        if pipeline is None:
            return None
        # Before the run's clock starts: a model load is never inside a search's budget.
        await pipeline.warm_up()
        return self._start(pipeline, index=index, body=body, params=params, caller=caller, listener=listener)

    def _start(
        self,
        pipeline: Pipeline,
        *,
        index: str | None,
        body: JSON,
        params: Mapping[str, str],
        caller: Caller,
        listener: RunListener | None = None,
    ) -> SearchRun:
        _check_size(body, params, self._settings.limits.max_search_size)
        request = SearchRequest(index=index, body=body, params=dict(params), caller=caller)
        return SearchRun(self, pipeline, request, verbose=params.get("verbose_pipeline") == "true", listener=listener)

    async def run(self, run: SearchRun) -> JSON:
        """``run`` once admitted (else a 429)."""
        with self.admission.admitted(await caller_key(run.request.caller, self.memory.identities)):
            return await run.run()

    async def msearch_lines(
        self, pairs: list[tuple[JSON, JSON]], *, index: str | None, params: Mapping[str, str]
    ) -> list[MsearchLine] | None:
        """Each line of an ``_msearch`` with its target and pipeline, resolved on its own; None
        when no line runs an answerbox pipeline, and the request is OpenSearch's alone."""
        targets = [_line_index(header, index) for header, _ in pairs]
        pipelines = await asyncio.gather(
            *(
                self.resolver.resolve(t, body, {**params, **_header_pipeline(h)})
                for (h, body), t in zip(pairs, targets, strict=True)
            )
        )
        if not any(pipelines):
            return None
        distinct = {id(p): p for p in pipelines if p is not None}
        await asyncio.gather(*(p.warm_up() for p in distinct.values()))
        return [
            MsearchLine(header=header, body=body, index=target, pipeline=pipeline)
            for (header, body), target, pipeline in zip(pairs, targets, pipelines, strict=True)
        ]

    async def msearch(self, lines: list[MsearchLine], *, params: Mapping[str, str], caller: Caller) -> JSON:
        """Each line with a pipeline is its own run; one upstream ``_msearch`` serves them all.
        A line's failure is that line's error object, as OpenSearch answers."""
        key = await caller_key(caller, self.memory.identities)
        with self.admission.admitted(key, runs=sum(line.pipeline is not None for line in lines)):
            return await self._msearch(lines, params=params, caller=caller)

    async def _msearch(self, lines: list[MsearchLine], *, params: Mapping[str, str], caller: Caller) -> JSON:
        runs: list[SearchRun | None] = []
        results: list[JSON | None] = []
        for line in lines:
            run, error = None, None
            if line.pipeline is not None:
                try:
                    scoped = {**params, **_header_scope(line.header)}
                    run = self._start(line.pipeline, index=line.index, body=line.body, params=scoped, caller=caller)
                except AnswerboxError as exc:
                    error = exc.to_body()
            runs.append(run)
            results.append(error)
        upstream = await asyncio.gather(*(_prepared(run) for run in runs))
        live = [i for i, result in enumerate(results) if result is None and not isinstance(upstream[i], dict)]
        for i, prepared in enumerate(upstream):
            if isinstance(prepared, dict):
                results[i] = prepared
        searches = [self._upstream_line(lines[i], runs[i], upstream[i]) for i in live]
        started = self.clock()
        own = {k: v for k, v in params.items() if k not in _OWN_PARAMS}
        # Every line may have failed already: then there is nothing to ask OpenSearch.
        answer = (
            await self.backend.msearch(searches=searches, params=own, caller=caller, inline=False)
            if searches
            else {"responses": []}
        )
        took = (self.clock() - started) * 1000
        responses = dict(zip(live, answer["responses"], strict=True))
        finished = await asyncio.gather(*(_responded(runs[i], responses[i], took) for i in live))
        for i, response in zip(live, finished, strict=True):
            results[i] = response
        return {"took": answer.get("took", round(took)), "responses": results}

    @staticmethod
    def _upstream_line(line: MsearchLine, run: SearchRun | None, prepared: Any) -> tuple[JSON, JSON]:
        # A line answerbox runs loses its search_pipeline (its OpenSearch part is inline in the
        # body); any other line keeps its own, for OpenSearch. The target is always explicit.
        header = {k: v for k, v in line.header.items() if not (run is not None and k == "search_pipeline")}
        header |= {"index": line.index} if line.index else {}
        return header, prepared.body if run is not None else line.body

    def scoped(self, pipeline: Pipeline, request: SearchRequest) -> ScopedSearch:
        scope = SearchScope.of(
            caller=request.caller,
            index=request.index,
            body=request.body,
            params=request.params,
            native=pipeline.inline_native,
        )
        return ScopedSearch(self.backend, scope)

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


def _header_pipeline(header: JSON) -> dict[str, str]:
    value = header.get("search_pipeline")
    return {"search_pipeline": value} if isinstance(value, str) else {}


def _header_scope(header: JSON) -> dict[str, str]:
    """A line header's parameters that narrow what the line sees (``routing``, ``preference``, ...):
    its run's own searches must keep them, as they keep the URL's."""
    return {
        name: str(value).lower() if isinstance(value, bool) else str(value)
        for name, value in header.items()
        if name in SCOPE_PARAMS and isinstance(value, str | bool | int)
    }


def _line_index(header: JSON, path_index: str | None) -> str | None:
    """An msearch line's target: its header's ``index`` (a name, a comma list or a JSON list),
    else the path's, as OpenSearch reads it; never "all indices" by omission."""
    value = header.get("index")
    if isinstance(value, list):
        return ",".join(str(name) for name in value)
    return value if isinstance(value, str) and value else path_index


def _check_size(body: JSON, params: Mapping[str, str], most: int) -> None:
    """``from`` + ``size`` within ``limits.max_search_size``: answerbox reads every hit it asks for."""
    asked = 0
    for name, default in (("from", 0), ("size", 10)):
        value: Any = params.get(name, body.get(name, default))
        try:
            asked += max(int(value), 0)
        except (TypeError, ValueError):
            return  # OpenSearch's own error says what is wrong with it
    if asked > most:
        raise InvalidRequest(
            f"[from] + [size] is {asked}, above limits.max_search_size ({most}) for a search pipeline answerbox runs"
        )


async def _prepared(run: SearchRun | None) -> SearchRequest | JSON | None:
    """The line's upstream request, its error object, or None for a line OpenSearch runs alone."""
    if run is None:
        return None
    try:
        return await run.prepare()
    except AnswerboxError as exc:
        return exc.to_body()


async def _responded(run: SearchRun | None, response: JSON, took_ms: float) -> JSON:
    if run is None or "error" in response:
        return response
    try:
        return await run.respond(response, search_ms=took_ms)
    except AnswerboxError as exc:
        return exc.to_body()
