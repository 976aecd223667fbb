"""Request bodies: read within ``limits`` (size, time), inflated where they came compressed,
refused unless declared JSON, and parsed within the depth and value limits: on the event loop
when small, in a worker thread when large."""

from __future__ import annotations

import asyncio
import json
import zlib
from collections.abc import Callable
from typing import Any, TypeVar

from starlette.requests import Request

from answerbox.core.config import Limits
from answerbox.core.errors import ParseError, RequestTimeout, RequestTooLarge, UnsupportedContentType
from answerbox.core.loop_timeouts import within

__all__ = [
    "MAX_JSON_VALUES",
    "decoded",
    "json_or_none",
    "may_name_pipeline",
    "parse_json",
    "parsed",
    "read_body",
    "read_decoded",
    "require_json",
    "too_many_values",
]


async def read_body(request: Request, limits: Limits) -> bytes:
    """The whole body, within ``limits.max_request_bytes`` and ``limits.body_timeout_s``.

    A body over the limit is refused with a 413 without being kept: what its client still
    sends is read and dropped (up to a few times the limit), so that the client, which
    writes its whole body before it reads, gets the 413 rather than a reset connection."""
    limit = limits.max_request_bytes
    try:
        async with within(limits.body_timeout_s):
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


# The encodings OpenSearch inflates (Netty's decompressor), as zlib's window bits: clients with
# compression on send gzip (opensearch-py's ``http_compress``, the JavaScript and Java clients').
_ENCODINGS = {"gzip": 31, "x-gzip": 31, "deflate": 15, "x-deflate": 15}
# A compressed body up to this size is inflated on the event loop: at most about a megabyte of
# output (deflate's ratio is about 1,000 to 1), a millisecond. Larger ones go to a worker thread.
_INLINE_INFLATE_BYTES = 1024


async def decoded(request: Request, raw: bytes, limits: Limits) -> bytes:
    """``raw`` inflated where its ``Content-Encoding`` is gzip or deflate, to at most
    ``limits.max_request_bytes`` (413 past it); any other body as it came, as OpenSearch reads
    it. The passthrough sends ``raw`` on, encoding and all."""
    encoding = request.headers.get("content-encoding")
    wbits = _ENCODINGS.get(encoding.strip().lower()) if encoding else None
    if wbits is None or not raw:
        return raw
    if len(raw) <= _INLINE_INFLATE_BYTES:
        return _inflate(raw, wbits, limits.max_request_bytes)
    return await asyncio.to_thread(_inflate, raw, wbits, limits.max_request_bytes)


async def read_decoded(request: Request, limits: Limits) -> bytes:
    """The body as answerbox reads it: ``read_body``, then ``decoded``."""
    return await decoded(request, await read_body(request, limits), limits)


def _inflate(raw: bytes, wbits: int, most: int) -> bytes:
    inflater = zlib.decompressobj(wbits)
    try:
        body = inflater.decompress(raw, most + 1)
    except zlib.error as exc:
        if wbits == 15:
            return _inflate(raw, -15, most)  # deflate without zlib's header, as some clients send it
        raise ParseError(f"request body is not valid {'gzip' if wbits == 31 else 'deflate'} data: {exc}") from None
    if len(body) > most:
        raise RequestTooLarge(f"request body is larger than the limit of {most} bytes once inflated")
    if not inflater.eof:
        raise ParseError("request body is cut off: its compressed stream does not end")
    if inflater.unused_data:  # refused, not dropped: what follows the stream would be lost
        raise ParseError("request body holds more after its compressed stream ends")
    return body


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
# So are bodies of more values (counted as their opening brackets and commas): parsing and walking
# 2 M empty objects took seconds, copying a pipeline search's body costs as much, and no search or
# pipeline needs so many (OpenSearch's terms query takes 65,536 at most).
MAX_JSON_VALUES = 100_000
# Bodies up to this size are parsed on the event loop: a millisecond or two, whatever their shape.
# Larger ones are parsed in a worker thread (``parsed``), with Python hooks for numbers and objects:
# json's C parser holds the interpreter lock throughout, and 10 MB of long numbers take a quarter
# of a second; each hook's call lets the loop's thread take the lock back.
_INLINE_PARSE_BYTES = 64 * 1024

T = TypeVar("T")


def _int(text: str) -> int:
    return int(text)


def _float(text: str) -> float:
    return float(text)


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    return dict(pairs)


def may_name_pipeline(raw: bytes) -> bool:
    """Whether a search body may hold a ``search_pipeline`` key, told by a scan without parsing:
    the key's own bytes, a JSON escape (which can spell any of its letters), or a zero byte (JSON
    in UTF-16 or UTF-32, which Python's json and OpenSearch both read)."""
    return b"search_pipeline" in raw or b"\\u" in raw or b"\x00" in raw


def too_many_values(raw: bytes) -> bool:
    """Whether ``raw`` has more than ``MAX_JSON_VALUES`` opening brackets and commas, told by a scan
    without parsing. They bound its values: each is the whole body, a container's first (one per
    opening bracket) or follows a comma; those inside strings only overcount."""
    if len(raw) <= MAX_JSON_VALUES:
        return False  # no more brackets and commas than bytes
    return raw.count(b"{") + raw.count(b"[") + raw.count(b",") > MAX_JSON_VALUES


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
    """The body as JSON; too many values or nesting too deep to handle is a parse error, as malformed JSON is."""
    if too_many_values(raw):
        raise ParseError(f"request body is too large to parse: more than {MAX_JSON_VALUES} values")
    try:
        if len(raw) > _INLINE_PARSE_BYTES:
            value = json.loads(raw, parse_int=_int, parse_float=_float, object_pairs_hook=_object)
        else:
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


async def parsed(raw: bytes, parse: Callable[[bytes], T] = parse_json) -> T:
    """``parse(raw)`` (``parse_json``, ``json_or_none``, ...): on the event loop when ``raw`` is
    small, in a worker thread otherwise, so that no body holds the loop."""
    if len(raw) <= _INLINE_PARSE_BYTES:
        return parse(raw)
    return await asyncio.to_thread(parse, raw)
