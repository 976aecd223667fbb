"""The unit layer: in-process only. No osmem-server, no uvicorn, no real LLM, no sleeping."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.unit.asgi import in_process

# Small enough that a test builds an oversized body in a line.
MAX_REQUEST_BYTES = 1024
MAX_MSEARCH_SEARCHES = 2


@pytest.fixture
async def app_client() -> AsyncIterator[httpx.AsyncClient]:
    """answerbox in-process, with small request limits and OpenSearch unreachable."""
    limits = {"max_request_bytes": MAX_REQUEST_BYTES, "max_msearch_searches": MAX_MSEARCH_SEARCHES}
    async with in_process(limits=limits) as client:
        yield client
