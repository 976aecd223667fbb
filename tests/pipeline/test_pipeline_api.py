"""A stored pipeline outlives its process and is shared with a second one (OpenSearch keeps it).
CRUD and validation errors are told in-process (tests/unit/pipeline/test_pipeline_api.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx
from answerbox.server import free_port

from tests.conftest import AnswerboxFactory


def test_pipeline_survives_restart_and_is_shared_with_a_second_process(
    make_answerbox: AnswerboxFactory, osmem_url: str, client: httpx.Client
) -> None:
    first = make_answerbox()
    client.put(f"{first}/_search/pipeline/shared", json={"description": "kept in OpenSearch", "request_processors": []})
    port = free_port()
    env = {**os.environ, "ANSWERBOX_OPENSEARCH__URL": osmem_url, "ANSWERBOX_PORT": str(port)}
    process = subprocess.Popen([sys.executable, "-m", "answerbox.ops.cli", "serve", "--log-level", "warning"], env=env)
    try:
        second = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                answer = client.get(f"{second}/_search/pipeline/shared")
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                time.sleep(0.2)
        assert answer.json() == {"shared": {"description": "kept in OpenSearch"}}
    finally:
        process.terminate()
        process.wait(10)
