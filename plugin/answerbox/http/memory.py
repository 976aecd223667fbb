"""The memory API of ml-commons (OpenSearch 2.12+), ``/_plugins/_ml/memory``.

Where the cluster runs ml-commons every request passes through to it as it came; elsewhere
answerbox serves it from its own index (``memory/own_index.py``) in the same shapes, with
the same paging (``max_results``, ``next_token``) and OpenSearch's error envelope.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response

from answerbox.core.config import Limits
from answerbox.core.errors import InvalidRequest, validation_problems
from answerbox.http.bodies import parsed, read_decoded, require_json
from answerbox.http.passthrough import Passthrough
from answerbox.http.rendering import OpenSearchJSON
from answerbox.memory import Memory
from answerbox.memory.records import MemoryFields, MessageUpdate, NewMessage, Paging
from answerbox.opensearch import JSON, Caller

__all__ = ["MemoryAPI"]

M = TypeVar("M", bound=BaseModel)


class MemoryAPI:
    def __init__(self, *, memory: Memory, passthrough: Passthrough, limits: Limits) -> None:
        self._memory = memory
        self._own = memory.own
        self._passthrough = passthrough
        self._limits = limits

    async def create(self, request: Request) -> Response:
        return await self._with_body(request, MemoryFields, self._own.create)

    async def memories(self, request: Request) -> Response:
        return await self._serve(request, lambda caller: self._own.memories(caller, _paging(request)))

    async def get(self, request: Request) -> Response:
        return await self._serve(request, lambda caller: self._own.get(caller, _memory_id(request)))

    async def update(self, request: Request) -> Response:
        return await self._with_body(
            request, MemoryFields, lambda caller, fields: self._own.update(caller, _memory_id(request), fields)
        )

    async def delete(self, request: Request) -> Response:
        return await self._serve(request, lambda caller: self._own.delete(caller, _memory_id(request)))

    async def add_message(self, request: Request) -> Response:
        return await self._with_body(
            request, NewMessage, lambda caller, message: self._own.add_message(caller, _memory_id(request), message)
        )

    async def messages(self, request: Request) -> Response:
        return await self._serve(
            request, lambda caller: self._own.messages(caller, _memory_id(request), _paging(request))
        )

    async def message(self, request: Request) -> Response:
        return await self._serve(request, lambda caller: self._own.message(caller, _message_id(request)))

    async def update_message(self, request: Request) -> Response:
        return await self._with_body(
            request,
            MessageUpdate,
            lambda caller, update: self._own.update_message(caller, _message_id(request), update),
        )

    async def traces(self, request: Request) -> Response:
        return await self._serve(
            request, lambda caller: self._own.traces(caller, _message_id(request), _paging(request))
        )

    async def search(self, request: Request) -> Response:
        async def refused(caller: Caller) -> JSON:
            raise InvalidRequest("answerbox's own memory store has no _search: list memories and messages with GET")

        return await self._serve(request, refused)

    async def _serve(self, request: Request, action: Callable[[Caller], Awaitable[JSON]]) -> Response:
        if await self._memory.in_cluster():
            return await self._passthrough.forward(request)
        return OpenSearchJSON(await action(Caller.from_headers(request.headers)))

    async def _with_body(
        self, request: Request, model: type[M], action: Callable[[Caller, M], Awaitable[JSON]]
    ) -> Response:
        if await self._memory.in_cluster():
            return await self._passthrough.forward(request)
        raw = await read_decoded(request, self._limits)
        require_json(request, raw)
        data: Any = await parsed(raw) if raw.strip() else {}
        try:
            fields = model.model_validate(data)
        except ValidationError as exc:
            raise InvalidRequest(f"invalid request body: {validation_problems(exc)}") from exc
        return OpenSearchJSON(await action(Caller.from_headers(request.headers), fields))


def _memory_id(request: Request) -> str:
    return str(request.path_params["memory_id"])


def _message_id(request: Request) -> str:
    return str(request.path_params["message_id"])


def _paging(request: Request) -> Paging:
    asked = {name: request.query_params[name] for name in ("max_results", "next_token") if name in request.query_params}
    try:
        return Paging.model_validate(asked)
    except ValidationError as exc:
        raise InvalidRequest(f"invalid paging: {validation_problems(exc)}") from exc
