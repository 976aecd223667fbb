"""One pooled connection set serves every caller: nothing one caller's answer set may
ride along on another caller's request."""

from __future__ import annotations

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.conftest import AnswerboxFactory
from tests.support.servers import serve


async def _set_cookie(request: Request) -> JSONResponse:
    response = JSONResponse({"set": True})
    response.set_cookie("session", "alice-secret")
    return response


async def _echo_cookie(request: Request) -> JSONResponse:
    return JSONResponse({"cookie": request.headers.get("cookie")})


def test_a_cookie_set_upstream_is_not_replayed_for_the_next_caller(
    make_answerbox: AnswerboxFactory, client: httpx.Client
) -> None:
    upstream = Starlette(routes=[Route("/set", _set_cookie), Route("/echo", _echo_cookie)])
    with serve(upstream) as upstream_url:
        # A host name, not an IP: cookie jars keep cookies for names.
        url = make_answerbox(opensearch={"url": upstream_url.replace("127.0.0.1", "localhost")})
        first = client.get(f"{url}/set")
        assert first.status_code == 200
        assert "alice-secret" in first.headers["set-cookie"]  # passed back as sent
        with httpx.Client(timeout=30) as other_caller:
            assert other_caller.get(f"{url}/echo").json() == {"cookie": None}
