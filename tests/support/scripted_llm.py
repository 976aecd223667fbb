"""A scripted OpenAI-compatible server: answers chat completions from a script and records every call.

It takes the ``response_format`` types in ``formats`` (none by default) and refuses any other
with ``refusal_status``, as a server refuses a form it does not know (vLLM: 400;
llama-cpp-python: 500); with ``caps`` false it refuses a schema that caps string lengths
too. The client's structured-output probe is answered apart (recorded in
``probes``, not ``calls``), so a script holds only the real calls.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from answerbox.llm.structured import PROBE
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

Reply = str | Callable[[list[dict[str, str]]], str]


@dataclass
class ScriptedLLM:
    """``replies`` are used in order (the last repeats); ``fail`` answers ``fail_status``; ``delay_s`` stalls;
    ``raw`` is sent as the whole body instead (a broken server); ``drip_s`` sends the body one
    byte at a time with that pause between bytes (a server that never quite stops); ``formats``
    are the ``response_format`` types taken ("json_schema", "json_object"), ``caps`` whether their
    schemas may hold ``maxLength``; ``cut_at_max_tokens`` ends a reply longer than the request's
    ``max_tokens`` (one word a token) there, as a server does."""

    replies: list[Reply] = field(default_factory=lambda: ["ok"])
    fail: bool = False
    fail_status: int = 500
    delay_s: float = 0.0
    raw: bytes | None = None
    drip_s: float = 0.0
    formats: tuple[str, ...] = ()
    refusal_status: int = 400
    caps: bool = True
    cut_at_max_tokens: bool = False
    model: str = "smollm2"  # what GET /v1/models lists
    calls: list[dict[str, Any]] = field(default_factory=list)
    probes: list[dict[str, Any]] = field(default_factory=list)

    def _next(self, messages: list[dict[str, str]]) -> str:
        reply = self.replies[min(len(self.calls) - 1, len(self.replies) - 1)]
        return reply(messages) if callable(reply) else reply

    async def _chat(self, request: Request) -> Response:
        payload = await request.json()
        form = payload.get("response_format")
        if is_probe(payload):
            self.probes.append(payload)
            if self.fail:
                return self._failure()
            return self._refused(form) or JSONResponse(self._completion(payload, '{"ok": true}'))
        self.calls.append(payload)
        if form is not None and (refused := self._refused(form)):
            return refused
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.fail:
            return self._failure()
        media_type = "text/event-stream" if payload.get("stream") else "application/json"
        if self.raw is not None:
            return Response(self.raw, media_type=media_type)
        if self.drip_s:
            return StreamingResponse(self._drip(json.dumps(self._completion(payload)).encode()), media_type=media_type)
        text = self._next(payload["messages"])
        if payload.get("stream"):
            return StreamingResponse(self._chunks(text), media_type="text/event-stream")
        return JSONResponse(self._completion(payload, text))

    def _failure(self) -> Response:
        return JSONResponse(
            {"error": {"message": "scripted failure", "type": "server_error"}}, status_code=self.fail_status
        )

    def _refused(self, form: dict[str, Any]) -> Response | None:
        if form.get("type") not in self.formats:
            message = f"response_format {form.get('type')!r} is not supported"
        elif not self.caps and '"maxLength"' in json.dumps(form):
            message = "'maxLength' is not permitted in a schema"
        else:
            return None
        error = {"message": message, "type": "invalid_request_error"}
        return JSONResponse({"error": error}, status_code=self.refusal_status)

    def _completion(self, payload: dict[str, Any], text: str | None = None) -> dict[str, Any]:
        text = text if text is not None else self._next(payload["messages"])
        words = list(re.finditer(r"\S+", text))
        cut = self.cut_at_max_tokens and len(words) > payload.get("max_tokens", len(words))
        if cut:
            text = text[: words[payload["max_tokens"] - 1].end()]
        return {
            "id": "chatcmpl-scripted",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": payload.get("model", "scripted"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "length" if cut else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": 10,
                "completion_tokens": len(text.split()),
                "total_tokens": 10 + len(text.split()),
            },
        }

    async def _drip(self, body: bytes) -> Any:
        for i in range(len(body)):
            yield body[i : i + 1]
            await asyncio.sleep(self.drip_s)

    async def _chunks(self, text: str) -> Any:
        for word in text.split(" "):
            chunk = {
                "id": "chatcmpl-scripted",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": "scripted",
                "choices": [{"index": 0, "delta": {"content": word + " "}, "finish_reason": None}],
            }
            yield f"data: {json.dumps(chunk)}\n\n"
        last = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        yield f"data: {json.dumps(last)}\n\n"
        yield "data: [DONE]\n\n"

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )

    async def _models(self, request: Request) -> Response:
        """The models it serves, as OpenAI's API lists them: the default model answerbox asks for."""
        return JSONResponse(
            {"object": "list", "data": [{"id": self.model, "object": "model", "created": 0, "owned_by": "scripted"}]}
        )


def is_probe(payload: dict[str, Any]) -> bool:
    """Whether a chat-completion request is the client's structured-output probe."""
    form = payload.get("response_format") or {}
    # The schema in either form: json_schema's nested one, or json_object's own.
    schema = (form.get("json_schema") or {}).get("schema") if form.get("type") == "json_schema" else form.get("schema")
    return bool(schema == PROBE.body)
