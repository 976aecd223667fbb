"""`_search` and `_msearch`: run the chosen pipeline, or pass the request through untouched."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from answerbox.config import Limits, Settings
from answerbox.errors import InvalidRequest, ParseError, RequestTimeout, RequestTooLarge, UnsupportedContentType
from answerbox.http.disconnect import until_disconnected
from answerbox.http.passthrough import Passthrough
from answerbox.opensearch import JSON, Caller
from answerbox.pipeline.engine import SearchEngine

__all__ = ["SearchHandler", "json_or_none", "parse_json", "read_body", "require_json"]


async def read_body(request: Request, limits: Limits) -> bytes:
    """The whole body, within ``limits.max_request_bytes`` and ``limits.body_timeout_s``.

    A body over the limit is refused with a 413 without being kept: what its client still
    sends is read and dropped (up to a few times the limit), so that the client, which
    writes its whole body before it reads, gets the 413 rather than a reset connection."""
    limit = limits.max_request_bytes
    try:
        async with asyncio.timeout(limits.body_timeout_s):
            declared = request.headers.get("content-length")
            if declared and declared.isdigit() and int(declared) > limit:
                await _drain(request, _DRAINED_LIMITS * limit)
                raise RequestTooLarge(f"request body of {declared} bytes is larger than the limit of {limit} bytes")
            chunks: list[bytes] = []
            size = 0
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    await _drain(request, _DRAINED_LIMITS * limit - size)
                    raise RequestTooLarge(f"request body is larger than the limit of {limit} bytes")
                chunks.append(chunk)
    except TimeoutError:
        raise RequestTimeout(
            f"the request body did not arrive within {limits.body_timeout_s:g}s (limits.body_timeout_s)"
        ) from None
    return b"".join(chunks)


# How much of a refused body is read and dropped, in limits; past it the connection is closed.
_DRAINED_LIMITS = 4


async def _drain(request: Request, most: int) -> None:
    dropped = 0
    async for chunk in request.stream():
        dropped += len(chunk)
        if dropped > most:
            return


# What a body answerbox parses may be declared as (the NDJSON of _msearch included).
_JSON_TYPES = frozenset({"application/json", "application/x-ndjson"})


def require_json(request: Request, body: bytes | None = None) -> None:
    """Refuse a body not declared JSON (406, as OpenSearch does); ``body`` empty: nothing to refuse.
    A browser's cross-site form can send only form and text bodies: never one answerbox runs."""
    if body is not None and not body.strip():
        return
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type not in _JSON_TYPES:
        raise UnsupportedContentType(f"Content-Type header [{media_type}] is not supported: send application/json")


# Deeper bodies are refused: copying and walking them would exhaust Python's stack, and no
# search or pipeline needs more (OpenSearch caps bool nesting far below this, too).
MAX_JSON_DEPTH = 100


def _too_deep(value: Any) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, dict | list):
                if depth >= MAX_JSON_DEPTH:
                    return True
                stack.append((child, depth + 1))
    return False


def parse_json(raw: bytes) -> Any:
    """The body as JSON; nesting too deep to handle is a parse error, as malformed JSON is."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise ParseError(f"request body is not valid JSON: {reason}") from None
    if _too_deep(value):
        raise ParseError(f"request body is not valid JSON: nested too deeply (more than {MAX_JSON_DEPTH} levels)")
    return value


def json_or_none(raw: bytes) -> Any:
    try:
        return parse_json(raw) if raw.strip() else {}
    except ParseError:
        return None


class SearchHandler:
    """Parses a search, hands it to the engine (or the passthrough), writes the answer."""

    def __init__(self, *, engine: SearchEngine, passthrough: Passthrough, settings: Settings) -> None:
        self._engine = engine
        self._passthrough = passthrough
        self._settings = settings

    async def search(self, http_request: Request) -> Response:
        raw = await read_body(http_request, self._settings.limits)
        body = json_or_none(raw)
        # Unparseable bodies go on as they came, so OpenSearch's own error comes back.
        run = None
        if isinstance(body, dict):
            caller = Caller.from_headers(http_request.headers)
            run = await self._engine.open(
                index=http_request.path_params.get("index"),
                body=body,
                params=dict(http_request.query_params),
                caller=caller,
            )
        if run is None:
            return await self._passthrough.forward(http_request, raw)
        require_json(http_request, raw)
        return JSONResponse(await until_disconnected(http_request, self._engine.run(run)))

    async def msearch(self, http_request: Request) -> Response:
        raw = await read_body(http_request, self._settings.limits)
        pairs = _ndjson_pairs(raw)
        most = self._settings.limits.max_msearch_searches
        if pairs is not None and len(pairs) > most:
            raise InvalidRequest(f"_msearch holds {len(pairs)} searches, above limits.max_msearch_searches ({most})")
        params = dict(http_request.query_params)
        lines = (
            await self._engine.msearch_lines(pairs, index=http_request.path_params.get("index"), params=params)
            if pairs
            else None
        )
        if lines is None:
            return await self._passthrough.forward(http_request, raw)
        require_json(http_request, raw)
        msearch = self._engine.msearch(lines, params=params, caller=Caller.from_headers(http_request.headers))
        return JSONResponse(await until_disconnected(http_request, msearch))


def _ndjson_pairs(raw: bytes) -> list[tuple[JSON, JSON]] | None:
    lines = [line for line in raw.split(b"\n") if line.strip()]
    if len(lines) % 2:
        return None
    parsed = [json_or_none(line) for line in lines]
    if not all(isinstance(p, dict) for p in parsed):
        return None
    return list(zip(parsed[::2], parsed[1::2], strict=True))
