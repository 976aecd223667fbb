"""Run an ASGI app under a real uvicorn server on a free loopback port, in a thread or its own process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn
import yaml
from answerbox.config import Settings
from answerbox.server import uvicorn_config


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve(app: Any, port: int | None = None, settings: Settings | None = None) -> Iterator[str]:
    """``app`` on 127.0.0.1; with ``settings``, under answerbox's own server configuration."""
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


@contextmanager
def serve_answerbox_process(settings: dict[str, Any], tmp_dir: Path) -> Iterator[str]:
    """``answerbox serve`` in its own process: what it measures is not shared with the test's
    own threads (one Python process would share one interpreter lock with the test client)."""
    port = free_port()
    config = tmp_dir / "answerbox.yaml"
    config.write_text(yaml.safe_dump({**settings, "host": "127.0.0.1", "port": port}))
    process = subprocess.Popen(
        [sys.executable, "-m", "answerbox.cli", "serve", "--config", str(config), "--log-level", "warning"],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"answerbox serve did not start (exit code {process.returncode})")
            try:
                if httpx.get(f"{url}/_answerbox/stats/search_pipeline", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(10)
