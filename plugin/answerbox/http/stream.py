"""``POST /{index}/_answerbox/stream``: the same search as ``_search``, answered as server-sent events.

Events, in order::

    event: search  data: {"hits": ...}: the hits as OpenSearch answered, before any response processor
    event: hits    data: the search response after every response processor but the answer
    event: token   data: {"text": "..."}              (zero or more, as the LLM writes)
    event: error   data: OpenSearch-shaped error       (the LLM failed; the fallback answer follows)
    event: answer  data: the final ext.answerbox object, with the checked citations
    event: done    data: {}

Everything before the first event (pipeline resolution, request processors, the search)
fails as a normal JSON error response; once the hits are out, failures become events, and
the stream still ends with ``answer`` and ``done``.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from answerbox.errors import AnswerboxError, InvalidRequest, ParseError
from answerbox.http.search import SearchHandler, finish, json_or_none, read_body, require_json
from answerbox.pipeline.base import JSON, PipelineContext, SearchRequest
from answerbox.pipeline.engine import Pipeline
from answerbox.processors.cited_answer.processor import CitedAnswer, Token

__all__ = ["AnswerStream"]


def _event(name: str, data: Any) -> str:
    # json.dumps escapes newlines, so every payload is one `data:` line.
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def _answerer(pipeline: Pipeline | None) -> tuple[Pipeline, CitedAnswer]:
    answerers = [p for p in pipeline.response_processors if isinstance(p, CitedAnswer)] if pipeline else []
    if pipeline is None or not answerers:
        raise InvalidRequest("_answerbox/stream needs a search pipeline with a [cited_answer] response processor")
    return pipeline, answerers[-1]


class AnswerStream(SearchHandler):
    """A search handler whose answer arrives as events."""

    async def stream(self, http_request: Request) -> Response:
        require_json(http_request)
        body = json_or_none(await read_body(http_request, self._max_body))
        if not isinstance(body, dict):
            raise ParseError("_answerbox/stream needs a JSON object as its search body")
        index = http_request.path_params["index"]
        params = dict(http_request.query_params)
        pipeline, answerer = _answerer(await self._resolver.resolve(index, body, params))
        request = self.request(pipeline, index, body, params, http_request)
        ctx = self.context(pipeline, request)
        # Failures up to the search are a normal error response; after it, events.
        request, response = await self.search_phase(pipeline, request, ctx)
        return StreamingResponse(
            self._events(pipeline, answerer, request, response, ctx),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
        )

    async def _events(
        self, pipeline: Pipeline, answerer: CitedAnswer, request: SearchRequest, response: JSON, ctx: PipelineContext
    ) -> AsyncIterator[str]:
        # The hits as OpenSearch found them, before any response processor: a page shows them
        # while the evaluator and the LLM work.
        yield _event("search", {"hits": copy.deepcopy(response.get("hits"))})
        try:
            # Every response processor but the answer, in the pipeline's own order.
            response = await self.response_phase(pipeline, request, response, ctx, skip=answerer)
        except AnswerboxError as exc:
            ctx.report.warn(f"the response processors failed: {exc.reason}")
            yield _event("error", exc.to_body())
            yield _event("answer", ctx.report.render())
            yield _event("done", {})
            return
        yield _event("hits", finish(pipeline, copy.deepcopy(response), ctx, verbose=False))
        started = time.perf_counter()
        try:
            async for event in answerer.stream(response, ctx):
                yield _event("token", {"text": event.text}) if isinstance(event, Token) else _event("error", event.error.to_body())
        except AnswerboxError as exc:
            # The hits are out already: the failure can only be told as an event.
            ctx.report.warn(f"processor [{answerer.name}] failed: {exc.reason}")
            yield _event("error", exc.to_body())
        ctx.report.timings_ms[answerer.name] = round((time.perf_counter() - started) * 1000, 2)
        ctx.report.timings_ms["total"] = round(ctx.elapsed_ms(), 2)
        yield _event("answer", ctx.report.render())
        yield _event("done", {})
