"""Run an ASGI app under a real uvicorn server on a free loopback port, in a thread or its own process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml
from answerbox.server import free_port, serve_in_thread

# Any ASGI app in a thread on a free loopback port (the package's, so benches share it).
serve = serve_in_thread


@contextmanager
def serve_answerbox_process(settings: dict[str, Any], tmp_dir: Path) -> Iterator[str]:
    """``answerbox serve`` in its own process: what it measures is not shared with the test's
    own threads (one Python process would share one interpreter lock with the test client)."""
    port = free_port()
    config = tmp_dir / "answerbox.yaml"
    config.write_text(yaml.safe_dump({**settings, "host": "127.0.0.1", "port": port}))
    process = subprocess.Popen(
        [sys.executable, "-m", "answerbox.ops.cli", "serve", "--config", str(config), "--log-level", "warning"],
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
