"""OpenSearch's security plugin, in miniature, for tests: osmem-server has none.

Basic-auth users with index patterns they may read and write; a request without valid
credentials gets 401 and one outside a user's indices gets 403, both in OpenSearch's error
shape. Reads are GET/HEAD and searches; everything else on an index is a write. Allowed
requests go on to osmem-server unchanged. ``GET /_plugins/_security/authinfo`` names the
user, as the security plugin does.
"""

from __future__ import annotations

import base64
import fnmatch
import json
from dataclasses import dataclass, field

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.support.forwarding import forward

_SEARCHES = ("_search", "_msearch", "_count")


@dataclass(frozen=True)
class User:
    password: str
    read: tuple[str, ...] = ()
    write: tuple[str, ...] = ()


def _error(status: int, error_type: str, reason: str) -> JSONResponse:
    cause = {"type": error_type, "reason": reason}
    return JSONResponse({"error": {"root_cause": [cause], **cause}, "status": status}, status_code=status)


@dataclass
class AuthProxy:
    upstream: str
    users: dict[str, User]
    denied: list[tuple[str, str, str]] = field(default_factory=list)  # (user, method, path)
    granted: list[tuple[str, str, str]] = field(default_factory=list)
    # A request on a document or search of an index that does not exist is answered 404
    # ``index_not_found_exception`` before any rights are judged (issue 85, L4): that answer says
    # nothing of whether the caller may write the index once it exists.
    missing_before_rights: bool = False

    async def _missing(self, request: Request, targets: list[str]) -> str | None:
        """The first concrete target of a request below an index (never its creation) that the
        cluster does not hold."""
        if len(request.url.path.strip("/").split("/")) < 2:
            return None
        async with httpx.AsyncClient(timeout=30) as http:
            for target in (t for t in targets if "*" not in t and "," not in t):
                if (await http.head(f"{self.upstream}/{target}")).status_code == 404:
                    return target
        return None

    def _user(self, request: Request) -> str | None:
        scheme, _, encoded = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "basic":
            return None
        name, _, password = base64.b64decode(encoded).decode().partition(":")
        user = self.users.get(name)
        return name if user is not None and user.password == password else None

    @staticmethod
    def _targets(request: Request, body: bytes) -> list[str]:
        first = request.url.path.strip("/").split("/")[0]
        if first == "_msearch":
            headers = [json.loads(line) for line in body.splitlines()[::2] if line.strip()]
            return [str(h.get("index", "*")) for h in headers]
        return [first] if first and not first.startswith("_") else ["*"]

    async def _handle(self, request: Request) -> Response:
        name = self._user(request)
        if name is None:
            return _error(401, "security_exception", "missing or wrong authentication credentials")
        if request.url.path == "/_plugins/_security/authinfo":
            return JSONResponse({"user_name": name, "backend_roles": [], "roles": ["own_index"], "tenants": {}})
        body = await request.body()
        last = request.url.path.rstrip("/").rsplit("/", 1)[-1]
        reading = request.method in ("GET", "HEAD") or (request.method == "POST" and last in _SEARCHES)
        allowed = self.users[name].read + self.users[name].write if reading else self.users[name].write
        targets = self._targets(request, body)
        missing = await self._missing(request, targets) if self.missing_before_rights else None
        if missing is not None:
            return _error(404, "index_not_found_exception", f"no such index [{missing}]")
        if not all(any(fnmatch.fnmatchcase(t, pattern) for pattern in allowed) for t in targets):
            self.denied.append((name, request.method, request.url.path))
            action = "read" if reading else "write"
            return _error(
                403, "security_exception", f"no permissions for [{action}] on {targets} and User [name={name}]"
            )
        self.granted.append((name, request.method, request.url.path))
        return await forward(self.upstream, request, body, timeout_s=30)

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/{path:path}", self._handle, methods=["GET", "HEAD", "POST", "PUT", "DELETE"])])


def basic(name: str, password: str) -> dict[str, str]:
    return {"authorization": "Basic " + base64.b64encode(f"{name}:{password}".encode()).decode()}
