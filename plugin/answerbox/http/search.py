"""`_search` and `_msearch`: run the chosen pipeline, or pass the request through untouched."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from answerbox.config import Settings
from answerbox.errors import InvalidRequest, ParseError, RequestTooLarge, UnsupportedContentType
from answerbox.http.disconnect import until_disconnected
from answerbox.http.passthrough import Passthrough
from answerbox.opensearch import JSON, Caller
from answerbox.pipeline.run import MsearchLine, SearchEngine

__all__ = ["SearchHandler", "json_or_none", "parse_json", "read_body", "require_json"]


async def read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise RequestTooLarge(f"request body of {declared} bytes is larger than the limit of {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise RequestTooLarge(f"request body is larger than the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def require_json(request: Request) -> None:
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json":
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
        self._max_body = settings.limits.max_request_bytes

    async def search(self, http_request: Request) -> Response:
        raw = await read_body(http_request, self._max_body)
        body = json_or_none(raw)
        index = http_request.path_params.get("index")
        params = dict(http_request.query_params)
        # Unparseable bodies go on as they came, so OpenSearch's own error comes back.
        pipeline = await self._engine.resolver.resolve(index, body, params) if isinstance(body, dict) else None
        if pipeline is None:
            return await self._passthrough.forward(http_request, raw)
        caller = Caller.from_headers(http_request.headers)
        search = self._engine.search(pipeline, index=index, body=body, params=params, caller=caller)
        return JSONResponse(await until_disconnected(http_request, search))

    async def msearch(self, http_request: Request) -> Response:
        raw = await read_body(http_request, self._max_body)
        pairs = _ndjson_pairs(raw)
        most = self._settings.limits.max_msearch_searches
        if pairs is not None and len(pairs) > most:
            raise InvalidRequest(f"_msearch holds {len(pairs)} searches, above limits.max_msearch_searches ({most})")
        index = http_request.path_params.get("index")
        params = dict(http_request.query_params)
        targets = [_line_index(header, index) for header, _ in pairs or []]
        resolve = self._engine.resolver.resolve
        pipelines = (
            await asyncio.gather(*(resolve(t, body, {**params, **_header_pipeline(h)}) for (h, body), t in zip(pairs, targets, strict=True)))
            if pairs is not None
            else []
        )
        if pairs is None or not any(pipelines):
            return await self._passthrough.forward(http_request, raw)
        lines = [
            MsearchLine(header=header, body=body, index=target, pipeline=pipeline)
            for (header, body), target, pipeline in zip(pairs, targets, pipelines, strict=True)
        ]
        msearch = self._engine.msearch(lines, params=params, caller=Caller.from_headers(http_request.headers))
        return JSONResponse(await until_disconnected(http_request, msearch))


def _header_pipeline(header: JSON) -> dict[str, str]:
    value = header.get("search_pipeline")
    return {"search_pipeline": value} if isinstance(value, str) else {}


def _line_index(header: JSON, path_index: str | None) -> str | None:
    """An msearch line's target: its header's ``index`` (a name, a comma list or a JSON list),
    else the path's, as OpenSearch reads it; never "all indices" by omission."""
    value = header.get("index")
    if isinstance(value, list):
        return ",".join(str(name) for name in value)
    return value if isinstance(value, str) and value else path_index


def _ndjson_pairs(raw: bytes) -> list[tuple[JSON, JSON]] | None:
    lines = [line for line in raw.split(b"\n") if line.strip()]
    if len(lines) % 2:
        return None
    parsed = [json_or_none(line) for line in lines]
    if not all(isinstance(p, dict) for p in parsed):
        return None
    return list(zip(parsed[::2], parsed[1::2], strict=True))
