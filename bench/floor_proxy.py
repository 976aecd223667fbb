"""The floor under answerbox's passthrough: a bare ASGI app under uvicorn (as answerbox runs it:
httptools, uvloop) that forwards each request with answerbox's own HTTP/1.1 client and nothing
else: no Starlette, no routing, no body or pipeline checks. ``bench/proxy_overhead.py --floor``
serves it beside answerbox, so what answerbox's own layers cost a request is answerbox's CPU
less the floor's, measured in the same run.

    python -m bench.floor_proxy OPENSEARCH_URL PORT
"""

from __future__ import annotations

import sys
from typing import Any

import uvicorn
from answerbox.http.upstream import UpstreamPool

# What a proxy must not forward (the client frames the body itself).
_DROPPED = frozenset({b"host", b"connection", b"keep-alive", b"transfer-encoding", b"content-length", b"expect"})


def floor_app(opensearch_url: str) -> Any:
    pool: UpstreamPool | None = None

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        nonlocal pool
        if scope["type"] != "http":
            return
        if pool is None:  # made on the server's loop, as answerbox makes its own in the lifespan
            pool = UpstreamPool(opensearch_url, ssl_context=None, limit=100, connect_timeout=5, read_timeout=60)
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        target = scope["raw_path"] + (b"?" + scope["query_string"] if scope["query_string"] else b"")
        headers = [(k, v) for k, v in scope["headers"] if k not in _DROPPED]
        upstream = await pool.request(scope["method"], target, headers, body)
        content = await upstream.read()
        kept = [(k, v) for k, v in upstream.headers if k.lower() not in (b"connection", b"transfer-encoding")]
        if upstream.content_length is None:
            kept.append((b"content-length", b"%d" % len(content)))
        await send({"type": "http.response.start", "status": upstream.status, "headers": kept})
        await send({"type": "http.response.body", "body": content})

    return app


if __name__ == "__main__":
    uvicorn.run(floor_app(sys.argv[1]), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
