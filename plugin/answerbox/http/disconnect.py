"""Work done for a caller stops when the caller leaves.

A pipeline search can hold the LLM and the model for seconds; a caller that gave up must
not keep them busy for the callers still waiting.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from starlette.requests import Request

from answerbox.core.errors import ClientClosedRequest

__all__ = ["until_disconnected"]

T = TypeVar("T")


async def _disconnect(request: Request) -> None:
    # The body is read already: the next ASGI message is the disconnect.
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def until_disconnected(request: Request, work: Coroutine[Any, Any, T]) -> T:
    """``work``'s result; cancelled, with ``ClientClosedRequest``, if the caller disconnects first."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnect(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if not task.done():
            raise ClientClosedRequest("the client closed the connection; its search was cancelled")
        return task.result()
    finally:
        for pending in (task, watcher):
            pending.cancel()
        await asyncio.gather(task, watcher, return_exceptions=True)
