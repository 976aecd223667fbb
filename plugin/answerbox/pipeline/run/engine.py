"""A search through a pipeline, end to end: the engine's one path.

    resolve → request processors → the upstream form → OpenSearch (caller's credentials)
            → response processors → the response with ``ext.answerbox``

``SearchEngine.open`` resolves a search's pipeline and gives its run (or None: not ours),
``SearchEngine.run`` runs it once admitted; ``msearch.py`` does the same for each line of an
``_msearch``, and a stream is the same run with a ``RunListener`` told of each phase as it ends.
``http/`` parses, calls this, and writes what comes back.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager

from answerbox.core.config import Settings
from answerbox.memory import Memory
from answerbox.opensearch import Caller, SearchBackend, with_pipeline
from answerbox.pipeline.base import JSON, PipelineContext, RunListener, SearchRequest
from answerbox.pipeline.caller_scope.scope import ScopedSearch, SearchScope
from answerbox.pipeline.catalogue.resolver import PipelineResolver
from answerbox.pipeline.limits.admission import Admission, caller_key
from answerbox.pipeline.limits.request_limits import CallerLimits
from answerbox.pipeline.run.conversation_memory import recall, remember, turn_of
from answerbox.pipeline.run.deadline import Deadline
from answerbox.pipeline.run.hits_asked import HitsAsked
from answerbox.pipeline.run.pipeline import Pipeline
from answerbox.pipeline.run.plan import plan_of

__all__ = ["SearchEngine", "SearchRun", "upstream_params"]

# Parameters answerbox consumes; OpenSearch must not see them once a pipeline ran here.
_OWN_PARAMS = ("search_pipeline", "verbose_pipeline")
# ext keys answerbox owns; OpenSearch rejects ext keys no plugin registered.
_OWN_EXT = ("answerbox", "generative_qa_parameters")


def upstream_params(params: Mapping[str, str]) -> dict[str, str]:
    """``params`` without those answerbox consumes, as OpenSearch must receive them."""
    return {name: value for name, value in params.items() if name not in _OWN_PARAMS}


class SearchRun:
    """One search's run through its pipeline, as ``SearchEngine.start`` opened it: ``ctx`` holds
    its plan, report and time."""

    def __init__(
        self,
        pipeline: Pipeline,
        request: SearchRequest,
        ctx: PipelineContext,
        *,
        asked: HitsAsked,
        backend: SearchBackend,
        memory: Memory,
        verbose: bool,
    ) -> None:
        self.pipeline = pipeline
        self.request = request
        self.ctx = ctx
        self.verbose = verbose
        self._asked = asked
        self._backend = backend
        self._memory = memory

    async def prepare(self) -> SearchRequest:
        """The request processors; returns the request in the form OpenSearch must receive."""
        await recall(self.ctx, self._memory, self.request.caller)
        self.request = await self.pipeline.process_request(self.request, self.ctx)
        # The response processors' own searches see what the search as sent sees.
        self.ctx.search = _scoped(self._backend, self.pipeline, self.request, self._asked)
        return self._upstream()

    async def respond(self, response: JSON, *, search_ms: float) -> JSON:
        """The response processors over OpenSearch's answer, then ``ext.answerbox``."""
        self.ctx.report.timings_ms["search"] = round(search_ms, 2)
        listener = self.ctx.listener
        if listener is not None:
            listener.searched(response)
        # A count or an aggregation (Dashboards' visualisations send size 0, to an index's default
        # pipeline too), or an export's first page: no answer, and no full run spent on one.
        skipped = {self.ctx.plans[p].skipped for p in self.pipeline.response_processors}
        if skipped and None not in skipped:  # the plan skips them all
            self.ctx.report.warn(f"{min(s for s in skipped if s)}: answerbox's response processors did not run")
            return self._rendered(response)
        ranked = (lambda current: listener.ranked(self._rendered(current))) if listener is not None else None
        response = await self.pipeline.process_response(self.request, response, self.ctx, ranked=ranked)
        await remember(self.ctx, self._memory, self.request.caller)
        return self._rendered(response)

    async def run(self) -> JSON:
        upstream = await self.prepare()
        clock = self.ctx.deadline.clock
        started = clock()
        response = await self._backend.search(
            index=upstream.index, body=upstream.body, params=upstream.params, caller=upstream.caller
        )
        return await self.respond(response, search_ms=(clock() - started) * 1000)

    def _upstream(self) -> SearchRequest:
        """Our parameters and ext keys removed, OpenSearch's own processors inline."""
        upstream = self.request.copy()
        upstream.body.pop("search_pipeline", None)
        upstream.params = upstream_params(upstream.params)
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
        self._backend = backend
        self._memory = memory
        self._settings = settings
        self.limits = CallerLimits(settings)
        self._clock = clock  # every run's Deadline reads it
        self._admission = Admission(settings.limits)
        # All http/ and msearch ask of the resolver: the pipeline a search names or its index's default
        # (None: OpenSearch's alone), and whether one naming none in its body may still run one.
        self.pipeline_for = resolver.resolve
        self.may_apply_unnamed = resolver.may_apply_unnamed

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
        pipeline = await self.pipeline_for(index, body, params)
        if pipeline is None:
            return None
        # Before the run's clock starts: a model load is never inside a search's budget.
        await pipeline.warm_up()
        return await self.start(pipeline, index=index, body=body, params=params, caller=caller, listener=listener)

    async def start(
        self,
        pipeline: Pipeline,
        *,
        index: str | None,
        body: JSON,
        params: Mapping[str, str],
        caller: Caller,
        listener: RunListener | None = None,
    ) -> SearchRun:
        """The search's run through ``pipeline``, the caller's limits checked, its clock started
        and its plan resolved: what it asks of its hits is read here, once."""
        asked = HitsAsked.of(body, params)
        self.limits.check_size(asked.window)
        request = SearchRequest(index=index, body=body, params=dict(params), caller=caller)
        qa = self.limits.generative_qa(body, native_rag=pipeline.native_rag)
        turn = turn_of(pipeline, qa)
        if turn is not None:
            pipeline = pipeline.for_conversation()
        ctx = PipelineContext(
            pipeline_id=pipeline.id,
            question=self.limits.question(body, params),
            search=_scoped(self._backend, pipeline, request, asked),
            generative_qa=qa,
            conversation=turn,
            deadline=Deadline(self._clock),
            listener=listener,
        )
        resolved = await plan_of(pipeline, qa, self._settings.limits, asked)
        ctx.plans = resolved.plans
        verbose = params.get("verbose_pipeline") == "true"
        if verbose:
            ctx.report.plan = resolved.plan
        return SearchRun(
            pipeline, request, ctx, asked=asked, backend=self._backend, memory=self._memory, verbose=verbose
        )

    @asynccontextmanager
    async def admitted(self, caller: Caller, runs: int = 1) -> AsyncIterator[int]:
        """Room for ``runs`` runs of ``caller``: as many as there is room for, at least one (else a
        429); yields how many were taken."""
        key = await caller_key(caller, self._memory.identities)
        taken = max(1, min(runs, self._admission.room(key)))
        with self._admission.admitted(key, runs=taken):
            yield taken

    async def run(self, run: SearchRun) -> JSON:
        """``run`` once admitted (else a 429)."""
        async with self.admitted(run.request.caller):
            return await run.run()

    async def msearch(
        self, searches: list[tuple[JSON, JSON]], params: Mapping[str, str], caller: Caller
    ) -> tuple[JSON, float]:
        """One upstream ``_msearch`` of ``searches`` (none: no call), and its time in ms."""
        started = self._clock()
        answer = (
            await self._backend.msearch(searches=searches, params=upstream_params(params), caller=caller, inline=False)
            if searches
            else {"responses": []}
        )
        return answer, (self._clock() - started) * 1000


def _scoped(backend: SearchBackend, pipeline: Pipeline, request: SearchRequest, asked: HitsAsked) -> ScopedSearch:
    scope = SearchScope.of(
        caller=request.caller,
        index=request.index,
        body=request.body,
        params=request.params,
        native=pipeline.inline_native,
        unscopable=asked.unscopable,
    )
    return ScopedSearch(backend, scope)
