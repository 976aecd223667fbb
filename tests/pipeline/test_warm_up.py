"""Warm-up: a replica loads what its stored pipelines run on before it says it is ready, and a
load never counts against a search's time budget; nor does the LLM's structured-output probe."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index
from tests.support.processors import SlowWarmUp, registry_with_test_processors
from tests.support.scripted_llm import ScriptedLLM

PIPELINE: dict[str, Any] = {"response_processors": [{"slow_warm_up": {}}]}


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    SlowWarmUp.gate.clear()
    yield SlowWarmUp.gate
    SlowWarmUp.gate.set()  # nothing waits on past the test


def test_a_replica_is_not_ready_until_its_stored_pipelines_are_warm(
    make_answerbox: AnswerboxFactory, opensearch: OpenSearch, client: httpx.Client, gate: threading.Event
) -> None:
    opensearch.index(index=".answerbox-pipelines", id="slow", body={"definition": PIPELINE}, refresh=True)
    url = make_answerbox(registry=registry_with_test_processors())
    warming = client.get(f"{url}/_answerbox/health")
    assert warming.status_code == 503
    assert warming.json()["status"] == "red"
    (check,) = [c for c in warming.json()["checks"] if c["check"] == "warm-up"]
    assert check["status"] == "fail"
    assert "loading" in check["detail"]
    gate.set()
    for _ in range(200):  # the warm-up task ends once the gate opens; the probe asks again, as kubelet does
        ready = client.get(f"{url}/_answerbox/health")
        if ready.status_code == 200:
            break
    assert ready.status_code == 200
    assert not [c for c in ready.json()["checks"] if c["check"] == "warm-up"]


def test_a_search_waits_for_its_pipelines_warm_up_outside_its_budget(
    make_answerbox: AnswerboxFactory, opensearch: OpenSearch, client: httpx.Client, gate: threading.Event
) -> None:
    bulk_index(opensearch, "books", [{"_id": "dune", "text": "Spice."}])
    url = make_answerbox(registry=registry_with_test_processors())
    # The warm-up takes a second, longer than the search's whole budget.
    opener = threading.Timer(1.0, gate.set)
    opener.start()
    body = {"query": {"match": {"text": "spice"}}, "search_pipeline": {**PIPELINE, "budget_s": 0.8}}
    answer = client.post(f"{url}/books/_search", json=body)
    opener.join()
    assert answer.status_code == 200, answer.text
    (note,) = answer.json()["ext"]["answerbox"]["warnings"]
    elapsed, left = map(float, re.findall(r"([\d.]+)s", note))
    assert elapsed < 0.5
    assert left > 0.3  # the second of warm-up came before the search's clock started


def test_the_llm_is_probed_for_structured_output_at_start_not_in_a_search(
    make_answerbox: AnswerboxFactory,
    opensearch: OpenSearch,
    scripted_llm: tuple[ScriptedLLM, str],
    client: httpx.Client,
) -> None:
    scripted, llm_url = scripted_llm
    scripted.formats = ("json_object",)
    url = make_answerbox(llm={"base_url": llm_url})
    for _ in range(200):  # no search yet: the probe is the start's
        if len(scripted.probes) == 2:
            break
        time.sleep(0.05)
    assert [p["response_format"]["type"] for p in scripted.probes] == ["json_schema", "json_object"]
    bulk_index(opensearch, "notes", [{"_id": "a", "text": "Spice is mined on Arrakis."}])
    scripted.replies = ['{"keywords": ["spice"]}']
    body = {
        "query": {"match": {"text": "where is spice mined"}},
        "search_pipeline": {"response_processors": [{"retrieval_evaluator": {"upper": 1, "lower": 1}}]},
    }
    assert client.post(f"{url}/notes/_search", json=body).status_code == 200
    assert scripted.calls  # the search asked the LLM (the corrective keywords) ...
    assert len(scripted.probes) == 2  # ... in the form found at the start, with no probe of its own
