"""answerbox in-process: the real app, its lifespan run, spoken to through httpx's ASGI transport.

OpenSearch is a closed local port: whatever reaches it fails at once with a 502, so a unit
test sees when a request it expected answerbox to settle got as far as OpenSearch. Given a
``FakeOpenSearch``, answerbox's own clients reach that instead (the passthrough still finds the
closed port); given an LLM's ASGI app (``ScriptedLLM.app()``), the LLM is that app, in-process.
No model loads: the model directory is one that does not exist, so a pipeline that needs the
reader or the evaluator degrades as it does where a model cannot load.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
from answerbox.app import Transports, create_app
from answerbox.core.config import Settings
from answerbox.pipeline.catalogue.registry import ProcessorRegistry
from starlette.types import ASGIApp

from tests.unit.fake_opensearch import FakeOpenSearch

__all__ = ["LLM_URL", "NO_MODELS", "closed_port", "in_process", "in_process_app", "opensearch_error"]


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


LLM_URL = "http://llm.in-process/v1"
NO_MODELS = "/nonexistent/answerbox-unit-layer-models"


@asynccontextmanager
async def in_process_app(
    *,
    cluster: FakeOpenSearch | None = None,
    llm_app: ASGIApp | None = None,
    registry: ProcessorRegistry | None = None,
    **overrides: Any,
) -> AsyncIterator[ASGIApp]:
    """The app built from ``Settings(**overrides)``, its lifespan running, as a server calls it;
    OpenSearch unreachable unless ``cluster`` stands in for it, the LLM ``llm_app`` where given."""
    overrides.setdefault("opensearch", {}).setdefault("url", f"http://127.0.0.1:{closed_port()}")
    overrides.setdefault("models", {}).setdefault("dir", NO_MODELS)
    if llm_app is not None:
        overrides.setdefault("llm", {}).setdefault("base_url", LLM_URL)
    transports = Transports(
        opensearch=cluster.connection() if cluster is not None else None,
        llm=httpx2.ASGITransport(app=llm_app) if llm_app is not None else None,
    )
    app = create_app(Settings(**overrides), registry, transports=transports)
    async with app.router.lifespan_context(app) as state:

        async def served(scope: Any, receive: Any, send: Any) -> None:
            # What a server does with the lifespan's state: a copy of it in every request's scope.
            await app({**scope, "state": dict(state or {})}, receive, send)

        yield served


@asynccontextmanager
async def in_process(**options: Any) -> AsyncIterator[httpx.AsyncClient]:
    """A client for ``in_process_app(**options)``."""
    async with in_process_app(**options) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://answerbox") as client:
            yield client


def opensearch_error(response: httpx.Response, status: int, error_type: str) -> str:
    """Check ``response`` is OpenSearch's error envelope with this status and type; its reason."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json; charset=UTF-8"  # as OpenSearch types it
    body = response.json()
    assert set(body) == {"error", "status"}
    assert body["status"] == status
    error = body["error"]
    assert error["type"] == error_type
    assert isinstance(error["reason"], str)
    assert error["root_cause"] == [{"type": error_type, "reason": error["reason"]}]
    reason: str = error["reason"]
    return reason
