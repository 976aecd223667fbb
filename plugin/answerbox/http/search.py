"""`_search` and `_msearch`: run the chosen pipeline, or pass the request through untouched."""

from __future__ import annotations

from functools import partial

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from answerbox.core.config import Settings
from answerbox.http.bodies import json_or_none, may_name_pipeline, parsed, read_body, require_json, too_many_values
from answerbox.http.disconnect import until_disconnected
from answerbox.http.passthrough import Passthrough
from answerbox.opensearch import JSON, Caller
from answerbox.pipeline.caller_limits import CallerLimits
from answerbox.pipeline.engine import SearchEngine
from answerbox.pipeline.msearch import MsearchRunner

__all__ = ["SearchHandler"]


class SearchHandler:
    """Parses a search, hands it to the engine (or the passthrough), writes the answer."""

    def __init__(self, *, engine: SearchEngine, passthrough: Passthrough, settings: Settings) -> None:
        self._engine = engine
        self._msearch = MsearchRunner(engine)
        self._passthrough = passthrough
        self._settings = settings

    async def search(self, http_request: Request) -> Response:
        raw = await read_body(http_request, self._settings.limits)
        index = http_request.path_params.get("index")
        params = dict(http_request.query_params)
        run = None
        # A plain search (most of a cluster's traffic) goes on unparsed: no pipeline can apply to it.
        if may_name_pipeline(raw) or await self._engine.resolver.may_apply_unnamed(index, params):
            body = await parsed(raw, json_or_none)
            # Bodies answerbox does not parse (malformed, too deep, too many values) go on as they
            # came: OpenSearch answers them.
            if isinstance(body, dict):
                caller = Caller.from_headers(http_request.headers)
                run = await self._engine.open(index=index, body=body, params=params, caller=caller)
        if run is None:
            return await self._passthrough.forward(http_request, raw)
        require_json(http_request, raw)
        return JSONResponse(await until_disconnected(http_request, self._engine.run(run)))

    async def msearch(self, http_request: Request) -> Response:
        raw = await read_body(http_request, self._settings.limits)
        pairs = await parsed(raw, partial(_ndjson_pairs, limits=self._engine.limits))
        params = dict(http_request.query_params)
        lines = (
            await self._msearch.lines(pairs, index=http_request.path_params.get("index"), params=params)
            if pairs
            else None
        )
        if lines is None:
            return await self._passthrough.forward(http_request, raw)
        require_json(http_request, raw)
        msearch = self._msearch.run(lines, params=params, caller=Caller.from_headers(http_request.headers))
        return JSONResponse(await until_disconnected(http_request, msearch))


def _ndjson_pairs(raw: bytes, *, limits: CallerLimits) -> list[tuple[JSON, JSON]] | None:
    """An ``_msearch`` body's searches, header and body each; None where a line is not a JSON object
    (or the body holds too many values to parse), and OpenSearch answers it. More searches than
    the limits allow are refused before any line is parsed or even split: their newlines are counted first,
    in a scan (two a search, and a blank line at the end)."""
    limits.check_msearch(raw.count(b"\n") // 2)
    lines = [line for line in raw.split(b"\n") if line.strip()]
    limits.check_msearch((len(lines) + 1) // 2)
    if len(lines) % 2 or too_many_values(raw):
        return None
    values = [json_or_none(line) for line in lines]
    if not all(isinstance(value, dict) for value in values):
        return None
    return list(zip(values[::2], values[1::2], strict=True))
