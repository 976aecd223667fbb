"""`_search` and `_msearch`: run the chosen pipeline, or pass the request through untouched."""

from __future__ import annotations

from functools import partial

from starlette.requests import Request
from starlette.responses import Response

from answerbox.core.config import Settings
from answerbox.http.bodies import (
    decoded,
    json_or_none,
    may_name_pipeline,
    parsed,
    read_body,
    require_json,
    too_many_values,
)
from answerbox.http.disconnect import until_disconnected
from answerbox.http.passthrough import Passthrough
from answerbox.http.rendering import Rendering, accepts_gzip
from answerbox.opensearch import JSON, Caller
from answerbox.pipeline.limits.request_limits import CallerLimits
from answerbox.pipeline.run.engine import SearchEngine
from answerbox.pipeline.run.msearch import MsearchRunner

__all__ = ["SearchHandler"]


class SearchHandler:
    """Parses a search, hands it to the engine (or the passthrough), writes the answer."""

    def __init__(self, *, engine: SearchEngine, passthrough: Passthrough, settings: Settings) -> None:
        self._engine = engine
        self._msearch = MsearchRunner(engine)
        self._passthrough = passthrough
        self._settings = settings

    async def answer(self, http_request: Request, index: str | None) -> Response:
        """The search of ``index`` (None: every index) as the caller sent it: its pipeline run, or
        sent on to OpenSearch."""
        raw = await read_body(http_request, self._settings.limits)
        text = await decoded(http_request, raw, self._settings.limits)
        params = _params(http_request)
        # A body in the URL runs no pipeline, not even the index's default (a cross-site page can
        # make a browser send any URL): checked before a default is resolved for an empty body.
        if _body_in_url(params):
            return await self._passthrough.forward(http_request, raw)
        # A plain search (most of a cluster's traffic) goes on unparsed: no pipeline can apply to it.
        if not may_name_pipeline(text) and not await self._engine.may_apply_unnamed(index, params):
            return await self._passthrough.forward(http_request, raw)
        run, rendering = None, Rendering()
        body = await parsed(text, json_or_none)
        # Bodies answerbox does not parse (malformed, too deep, too many values) go on as they
        # came: OpenSearch answers them.
        if isinstance(body, dict):
            caller = Caller.from_headers(http_request.headers)
            rendering, params = Rendering.split(params)
            run = await self._engine.open(index=index, body=body, params=params, caller=caller)
        if run is None:
            return await self._passthrough.forward(http_request, raw)
        require_json(http_request, text)
        answer = await until_disconnected(http_request, self._engine.run(run))
        return await rendering.response(answer, compressed=_accepts_gzip(http_request))

    async def msearch(self, http_request: Request, index: str | None) -> Response:
        """The ``_msearch`` of ``index`` (None: every index): its pipelines run where a line may
        have one, sent on to OpenSearch otherwise."""
        raw = await read_body(http_request, self._settings.limits)
        text = await decoded(http_request, raw, self._settings.limits)
        params = _params(http_request)
        if _body_in_url(params):  # as for a search: its lines go to OpenSearch as sent
            return await self._passthrough.forward(http_request, raw)
        limits = self._engine.limits
        if not may_name_pipeline(text):
            # No line names a pipeline: the headers alone tell whether a default applies to one.
            headers = await parsed(text, partial(_ndjson_headers, limits=limits))
            if headers is None or not await self._msearch.may_apply_unnamed(headers, index=index, params=params):
                return await self._passthrough.forward(http_request, raw)
        pairs = await parsed(text, partial(_ndjson_pairs, limits=limits))
        lines = await self._msearch.lines(pairs, index=index, params=params) if pairs else None
        if lines is None:
            return await self._passthrough.forward(http_request, raw)
        require_json(http_request, text)
        rendering, params = Rendering.split(params)
        msearch = self._msearch.run(lines, params=params, caller=Caller.from_headers(http_request.headers))
        return await rendering.response(
            await until_disconnected(http_request, msearch), compressed=_accepts_gzip(http_request)
        )


def _accepts_gzip(http_request: Request) -> bool:
    # As OpenSearch answers a caller that accepts gzip (``http.compression``, on by default).
    return accepts_gzip(http_request.headers.get("accept-encoding"))


def _body_in_url(params: dict[str, str]) -> bool:
    """Whether the request's body is OpenSearch's ``source`` parameter, read in place of a body."""
    return "source" in params


def _params(http_request: Request) -> dict[str, str]:
    # Most searches have no query string, and parsing even an empty one costs about what a plain search's own checks do.
    return dict(http_request.query_params) if http_request.scope["query_string"] else {}


def _ndjson_pairs(raw: bytes, *, limits: CallerLimits) -> list[tuple[JSON, JSON]] | None:
    """An ``_msearch`` body's searches, header and body each; None where a line is not a JSON object
    (or the body holds too many values to parse), and OpenSearch answers it."""
    values = _objects(_ndjson_lines(raw, limits=limits))
    return None if values is None else list(zip(values[::2], values[1::2], strict=True))


def _ndjson_headers(raw: bytes, *, limits: CallerLimits) -> list[JSON] | None:
    """An ``_msearch`` body's header lines alone, as ``_ndjson_pairs`` reads them; its bodies unparsed."""
    lines = _ndjson_lines(raw, limits=limits)
    return _objects(None if lines is None else lines[::2])


def _ndjson_lines(raw: bytes, *, limits: CallerLimits) -> list[bytes] | None:
    """An ``_msearch`` body's lines, a header and a body a search; None where they do not pair up
    (or the body holds too many values to parse). More searches than the limits allow are refused
    before any line is split: their newlines are counted first, in a scan (two a search, and a
    blank line at the end)."""
    limits.check_msearch(raw.count(b"\n") // 2)
    lines = [line for line in raw.split(b"\n") if line.strip()]
    limits.check_msearch((len(lines) + 1) // 2)
    return None if len(lines) % 2 or too_many_values(raw) else lines


def _objects(lines: list[bytes] | None) -> list[JSON] | None:
    """Each line as a JSON object; None where one is not."""
    if lines is None:
        return None
    values = [json_or_none(line) for line in lines]
    return values if all(isinstance(value, dict) for value in values) else None
