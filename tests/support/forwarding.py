"""Sending a request a test server received on to an upstream, as the test proxies do."""

from __future__ import annotations

import httpx
from starlette.requests import Request
from starlette.responses import Response


async def forward(upstream: str, request: Request, body: bytes, timeout_s: float) -> Response:
    async with httpx.AsyncClient(base_url=upstream, timeout=timeout_s) as client:
        answer = await client.request(
            request.method,
            httpx.URL(path=request.url.path, query=request.url.query.encode()),
            content=body,
            headers={"content-type": request.headers.get("content-type", "application/json")},
        )
    return Response(
        answer.content, status_code=answer.status_code, headers={"content-type": answer.headers.get("content-type", "")}
    )
