"""The uvicorn server answerbox runs under, with the connection limits from its settings."""

from __future__ import annotations

from typing import Any

import uvicorn

from answerbox.config import Settings

__all__ = ["uvicorn_config"]


def uvicorn_config(app: Any, settings: Settings, *, port: int | None = None, log_level: str = "warning") -> uvicorn.Config:
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
