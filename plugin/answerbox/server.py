"""The uvicorn server answerbox runs under, with the connection limits from its settings; and
any ASGI app served from a thread (the tests' and benches' stand-ins, answerbox itself in them)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from answerbox.core.config import Settings

__all__ = ["HeaderTimeoutProtocol", "free_port", "serve_in_thread", "uvicorn_config"]


def uvicorn_config(
    app: Any, settings: Settings, *, port: int | None = None, log_level: str = "warning"
) -> uvicorn.Config:
    """Past ``limits.max_connections`` open connections uvicorn answers 503 at once, an idle
    keep-alive connection is closed after ``limits.keep_alive_s``, and one whose request headers
    take longer than ``limits.header_timeout_s`` is closed: slow or idle clients cannot hold the
    server's sockets without end (a slow body is ``limits.body_timeout_s``'s). No ``Server``
    header: OpenSearch sends none, and a drop-in in front of it should not name its own stack."""
    limits = settings.limits
    return uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port if port is None else port,
        log_level=log_level,
        lifespan="on",
        http=_with_header_timeout(limits.header_timeout_s),
        limit_concurrency=limits.max_connections,
        timeout_keep_alive=limits.keep_alive_s,
        server_header=False,
    )


class HeaderTimeoutProtocol(HttpToolsProtocol):
    """uvicorn's HTTP/1.1 protocol (httptools: uvicorn[standard]'s, on CPython), closing a
    connection whose request headers are not all in ``header_timeout_s`` after it opened, or after
    a later request's first byte. uvicorn's own keep-alive timeout starts only once a response is
    sent: a socket that never sends a request, or trickles its headers, would stay open for good."""

    header_timeout_s: float
    # When the headers now awaited must all be in (None: none awaited). One timer a connection
    # checks it, re-armed only when it finds a later time: a timer made and cancelled each
    # request costs a keep-alive request several microseconds.
    _headers_due: float | None = None
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_headers()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        # The first request's time runs from the connection's opening, set above.
        if self._headers_due is None:
            self._await_headers()

    def on_headers_complete(self) -> None:
        self._headers_due = None
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._headers_due = None
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        super().connection_lost(exc)

    def _await_headers(self) -> None:
        self._headers_due = self.loop.time() + self.header_timeout_s
        if self._header_timer is None:
            self._header_timer = self.loop.call_at(self._headers_due, self._check_headers)

    def _check_headers(self) -> None:
        self._header_timer = None
        due = self._headers_due
        if due is None:
            return
        if self.loop.time() < due:  # headers awaited since the timer was armed, or a timer a little early
            self._header_timer = self.loop.call_at(due, self._check_headers)
        elif not self.transport.is_closing():
            self.transport.close()


def _with_header_timeout(seconds: float) -> type[HeaderTimeoutProtocol]:
    # uvicorn makes each connection's protocol from the class alone: the setting rides on a subclass.
    class Protocol(HeaderTimeoutProtocol):
        header_timeout_s = seconds

    return Protocol


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
