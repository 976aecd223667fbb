"""The uvicorn server answerbox runs under, with the connection limits from its settings; and
any ASGI app served from a thread (the tests' and benches' stand-ins, answerbox itself in them)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from answerbox.config import Settings

__all__ = ["free_port", "serve_in_thread", "uvicorn_config"]


def uvicorn_config(
    app: Any, settings: Settings, *, port: int | None = None, log_level: str = "warning"
) -> uvicorn.Config:
    """Past ``limits.max_connections`` open connections uvicorn answers 503 at once, and an idle
    keep-alive connection is closed after ``limits.keep_alive_s``: slow or idle clients cannot
    hold the server's sockets without end (a slow body is ``limits.body_timeout_s``'s)."""
    limits = settings.limits
    return uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port if port is None else port,
        log_level=log_level,
        lifespan="on",
        limit_concurrency=limits.max_connections,
        timeout_keep_alive=limits.keep_alive_s,
    )


def free_port() -> int:
    """A loopback port free now (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve_in_thread(app: Any, *, port: int | None = None, settings: Settings | None = None) -> Iterator[str]:
    """``app`` under uvicorn on 127.0.0.1 in a daemon thread, until the block ends; yields its URL.
    With ``settings``, under answerbox's own server configuration (``uvicorn_config``)."""
    port = port or free_port()
    if settings is not None:
        config = uvicorn_config(app, settings.model_copy(update={"host": "127.0.0.1"}), port=port)
    else:
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
