"""``_msearch`` through pipelines: each line resolved and run on its own, as ``_search`` would
run it, and one upstream ``_msearch`` for all lines."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from answerbox.core.errors import AnswerboxError, RejectedExecution
from answerbox.opensearch import Caller
from answerbox.pipeline.base import JSON, SearchRequest
from answerbox.pipeline.caller_scope.scope import SCOPE_PARAMS
from answerbox.pipeline.run.engine import SearchEngine, SearchRun
from answerbox.pipeline.run.pipeline import Pipeline

__all__ = ["MsearchLine", "MsearchRunner"]

_REFUSED_LINE = RejectedExecution(
    "rejected execution of search pipeline run: this _msearch's lines that run a pipeline are more than "
    "the runs left to start (limits.max_concurrent_runs, limits.max_runs_per_caller)"
)


@dataclass(frozen=True, slots=True)
class MsearchLine:
    header: JSON
    body: JSON
    index: str | None  # the line's target, as OpenSearch reads it
    pipeline: Pipeline | None  # None: OpenSearch runs the line alone


class MsearchRunner:
    """An ``_msearch``'s lines through ``engine``: each resolved, started and admitted by it."""

    def __init__(self, engine: SearchEngine) -> None:
        self._engine = engine

    async def lines(
        self, pairs: list[tuple[JSON, JSON]], *, index: str | None, params: Mapping[str, str]
    ) -> list[MsearchLine] | None:
        """Each line of an ``_msearch`` with its target and pipeline, resolved on its own; None
        when no line runs an answerbox pipeline, and the request is OpenSearch's alone."""
        targets = [_line_index(header, index) for header, _ in pairs]
        pipelines = await asyncio.gather(
            *(
                self._engine.pipeline_for(t, body, {**params, **_header_pipeline(h)})
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

    async def may_apply_unnamed(self, headers: list[JSON], *, index: str | None, params: Mapping[str, str]) -> bool:
        """Whether any line of an ``_msearch`` none of whose lines names a pipeline may still run
        one: by the URL's parameter, or its target's default. False: its bodies go on unparsed."""
        targets = {_line_index(header, index) for header in headers}
        applies = await asyncio.gather(*(self._engine.may_apply_unnamed(t, params) for t in targets))
        return any(applies)

    async def run(self, lines: list[MsearchLine], *, params: Mapping[str, str], caller: Caller) -> JSON:
        """Each line with a pipeline is its own run; one upstream ``_msearch`` serves them all.
        A line's failure is that line's error object, as OpenSearch answers."""
        piped = [i for i, line in enumerate(lines) if line.pipeline is not None]
        # Each line that runs a pipeline is one run: as many as there is room for run, the rest
        # are each refused with a 429, as OpenSearch refuses lines past its search queue. With
        # no room at all the whole _msearch is refused, as a search would be.
        async with self._engine.admitted(caller, runs=len(piped)) as taken:
            return await self._run(lines, params=params, caller=caller, refused=frozenset(piped[taken:]))

    async def _run(
        self, lines: list[MsearchLine], *, params: Mapping[str, str], caller: Caller, refused: frozenset[int]
    ) -> JSON:
        runs: list[SearchRun | None] = []
        results: list[JSON | None] = []
        for i, line in enumerate(lines):
            run, error = None, None
            if i in refused:
                error = _REFUSED_LINE.to_body()
            elif line.pipeline is not None:
                try:
                    scoped = {**params, **_header_scope(line.header)}
                    run = await self._engine.start(
                        line.pipeline, index=line.index, body=line.body, params=scoped, caller=caller
                    )
                except AnswerboxError as exc:
                    error = exc.to_body()
            runs.append(run)
            results.append(error)
        upstream = await asyncio.gather(*(_prepared(run) for run in runs))
        live = [i for i, result in enumerate(results) if result is None and not isinstance(upstream[i], dict)]
        for i, prepared in enumerate(upstream):
            if isinstance(prepared, dict):
                results[i] = prepared
        searches = [_upstream_line(lines[i], runs[i], upstream[i]) for i in live]
        answer, took = await self._engine.msearch(searches, params, caller)
        responses = dict(zip(live, answer["responses"], strict=True))
        finished = await asyncio.gather(*(_responded(runs[i], responses[i], took) for i in live))
        for i, response in zip(live, finished, strict=True):
            results[i] = response
        return {"took": answer.get("took", round(took)), "responses": results}


def _upstream_line(line: MsearchLine, run: SearchRun | None, prepared: Any) -> tuple[JSON, JSON]:
    # A line answerbox runs loses its search_pipeline (its OpenSearch part is inline in the
    # body); any other line keeps its own, for OpenSearch. The target is always explicit.
    header = {k: v for k, v in line.header.items() if not (run is not None and k == "search_pipeline")}
    header |= {"index": line.index} if line.index else {}
    return header, prepared.body if run is not None else line.body


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
