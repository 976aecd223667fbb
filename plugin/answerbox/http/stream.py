"""``POST /{index}/_answerbox/stream``: the same search as ``_search``, answered as server-sent events.

Events, in order::

    event: search  data: {"hits": ...}: the hits as OpenSearch answered, before any response processor
    event: hits    data: the search response after every response processor before the answer's
    event: snippet data: the reader's answer with its confidence, the moment it has one (no LLM yet)
    event: sentence data: {"text", "citations", "verdict"}  (zero or more: each sentence of the
                   LLM's that held up against its citations, once checked; one that does
                   not is never sent, so a page shows no text nobody checked)
    event: error   data: OpenSearch-shaped error       (something failed; the answer degrades around it)
    event: answer  data: the final ext.answerbox object, with the checked citations
    event: done    data: {}

It is the engine's run of ``_search``, watched: the same processors, budget, timeouts and
``ignore_failure``. Everything before the first event (pipeline resolution, request
processors, the search) fails as a normal JSON error response; once the hits are out,
failures become events, and the stream still ends with ``answer`` and ``done``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from answerbox.core.config import Settings
from answerbox.core.contract import Answer, CheckedSentence
from answerbox.core.errors import AnswerboxError, ClientClosedRequest, InvalidRequest, ParseError
from answerbox.http.bodies import json_or_none, parsed, read_decoded, require_json
from answerbox.http.disconnect import until_disconnected
from answerbox.http.rendering import Rendering
from answerbox.opensearch import JSON, Caller
from answerbox.pipeline.run.engine import SearchEngine, SearchRun

__all__ = ["AnswerStream"]


def _event(name: str, data: Any) -> str:
    # json.dumps escapes newlines, so every payload is one `data:` line.
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


class _Events:
    """A run's listener: each phase becomes an event, serialised the moment it happens."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[str | None] = asyncio.Queue()
        self.search_done = asyncio.Event()

    def searched(self, response: JSON) -> None:
        self.queue.put_nowait(_event("search", {"hits": response.get("hits")}))
        self.search_done.set()

    def ranked(self, response: JSON) -> None:
        self.queue.put_nowait(_event("hits", response))

    def snippet(self, answer: Answer) -> None:
        self.queue.put_nowait(_event("snippet", answer.model_dump(by_alias=True)))

    def sentence(self, sentence: CheckedSentence) -> None:
        self.queue.put_nowait(_event("sentence", sentence.model_dump(by_alias=True)))

    def failed(self, error: AnswerboxError) -> None:
        self.queue.put_nowait(_event("error", error.to_body()))


async def _searched(task: asyncio.Task[JSON], events: _Events) -> None:
    """Until OpenSearch has answered, or the run ended (failed) before it did."""
    searched = asyncio.ensure_future(events.search_done.wait())
    try:
        await asyncio.wait({task, searched}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        searched.cancel()


class AnswerStream:
    def __init__(self, *, engine: SearchEngine, settings: Settings) -> None:
        self._engine = engine
        self._limits = settings.limits

    async def stream(self, http_request: Request) -> Response:
        require_json(http_request)
        body = await parsed(await read_decoded(http_request, self._limits), json_or_none)
        if not isinstance(body, dict):
            raise ParseError("_answerbox/stream needs a JSON object as its search body")
        events = _Events()
        caller = Caller.from_headers(http_request.headers)
        # Its events are answerbox's own, one line each: no filter_path nor format can apply, nor pretty.
        rendering, params = Rendering.split(http_request.query_params)
        if rendering.filters or rendering.format != "json":
            raise InvalidRequest("_answerbox/stream takes no filter_path nor format: its events are answerbox's own")
        index = http_request.path_params["index"]
        run = await self._engine.open(index=index, body=body, params=params, caller=caller, listener=events)
        if run is None or not run.pipeline.writes_answer:
            raise InvalidRequest("_answerbox/stream needs a search pipeline with a [cited_answer] response processor")
        task = asyncio.create_task(self._engine.run(run))
        # Failures up to the search are a normal error response; after it, events. A caller who
        # leaves before the first event stops the run, as on _search.
        try:
            await until_disconnected(http_request, _searched(task, events))
        except ClientClosedRequest:
            task.cancel()
            raise
        if not events.search_done.is_set():
            await task  # it failed before OpenSearch answered: its error is the response
        return StreamingResponse(
            self._events(run, task, events),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
        )

    async def _events(self, run: SearchRun, task: asyncio.Task[JSON], events: _Events) -> AsyncIterator[str]:
        task.add_done_callback(lambda _: events.queue.put_nowait(None))
        try:
            while (event := await events.queue.get()) is not None:
                yield event
            error = task.exception()
            if isinstance(error, AnswerboxError):
                run.ctx.report.warn(f"the response processors failed: {error.reason}")
                yield _event("error", error.to_body())
                yield _event("answer", run.report())
            elif error is not None:
                raise error
            else:
                yield _event("answer", task.result()["ext"]["answerbox"])
            yield _event("done", {})
        finally:
            # A client that leaves mid-stream closes this generator: its run stops too.
            task.cancel()
