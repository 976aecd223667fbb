"""A stored pipeline outlives its process and is shared with a second one (OpenSearch keeps it), and a
write through one replica reaches the other within its cache window.
CRUD and validation errors are told in-process (tests/unit/pipeline/test_pipeline_api.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

import httpx
from answerbox.server import free_port
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index


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


def _runs(client: httpx.Client, replica: str) -> float | None:
    """The ``budget_s`` of the pipeline ``rp`` as ``replica`` runs it for a search; None where it runs none."""
    found = client.post(f"{replica}/books/_search", params={"search_pipeline": "rp", "verbose_pipeline": "true"})
    if found.status_code != 200:
        assert "Pipeline rp is not defined" in found.text, found.text
        return None
    budget: float = found.json()["ext"]["answerbox"]["plan"]["budget_s"]["value"]
    return budget


def _seen_within(client: httpx.Client, replica: str, expected: float | None, window_s: float) -> float:
    """Seconds until ``replica`` runs ``expected``; fails past ``window_s``."""
    started = time.monotonic()
    while (ran := _runs(client, replica)) != expected:
        assert time.monotonic() - started < window_s, f"after {window_s}s the replica still runs {ran}"
        time.sleep(0.05)
    return time.monotonic() - started


def test_a_pipeline_written_through_one_replica_reaches_the_other_within_the_cache_window(
    make_answerbox: AnswerboxFactory, opensearch: OpenSearch, client: httpx.Client
) -> None:
    """Two replicas on one cluster: the one written through answers at once; the other once its cached
    read of the id expires: ``opensearch.default_pipeline_cache_s`` after an update or a DELETE, at most
    1 s after the PUT of a new id (a miss is cached no longer)."""
    cache_s, slack_s = 3.0, 1.0
    bulk_index(opensearch, "books", [{"title": "Dune"}])
    a, b = (make_answerbox(opensearch={"default_pipeline_cache_s": cache_s}) for _ in range(2))
    assert _runs(client, b) is None  # b now holds the miss
    for budget, window_s in ((7.0, 1.0), (8.0, cache_s), (None, cache_s)):  # PUT, update, DELETE
        if budget is None:
            assert client.delete(f"{a}/_search/pipeline/rp").status_code == 200
        else:
            # A step, so that the search shows its plan.
            step: dict[str, Any] = {"request_processors": [{"conversation": {}}]}
            written = client.put(f"{a}/_search/pipeline/rp", json={"budget_s": budget, **step})
            assert written.status_code == 200, written.text
        assert _runs(client, a) == budget  # at once on the replica written through
        _seen_within(client, b, budget, window_s + slack_s)
