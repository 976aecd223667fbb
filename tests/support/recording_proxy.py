"""A recording hop between answerbox and osmem-server: every request's method, path, query and
headers are kept, so tests can see exactly what reached "OpenSearch"."""

from __future__ import annotations

from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support.forwarding import forward


@dataclass
class Recorded:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes


@dataclass
class RecordingProxy:
    upstream: str
    timeout_s: float = 5.0
    requests: list[Recorded] = field(default_factory=list)

    async def _forward(self, request: Request) -> Response:
        body = await request.body()
        self.requests.append(Recorded(request.method, request.url.path, request.url.query, dict(request.headers), body))
        return await forward(self.upstream, request, body, self.timeout_s)

    def app(self) -> Starlette:
        return Starlette(
            routes=[Route("/{path:path}", self._forward, methods=["GET", "HEAD", "POST", "PUT", "DELETE"])]
        )

    def matching(self, path_part: str) -> list[Recorded]:
        return [r for r in self.requests if path_part in r.path]
