"""The pipeline's time budget: shared out by the engine, so one slow processor cannot starve the rest."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index
from tests.support.processors import Sleep, registry_with_test_processors


@pytest.fixture
def url(make_answerbox: AnswerboxFactory, opensearch: OpenSearch) -> str:
    bulk_index(opensearch, "notes", [{"_id": "1", "text": "a note"}])
    return make_answerbox(registry_with_test_processors(), limits={"pipeline_budget_s": 20})


def _search(client: httpx.Client, url: str, pipeline: dict[str, Any], **kwargs: Any) -> httpx.Response:
    return client.post(
        f"{url}/notes/_search", json={"query": {"match": {"text": "note"}}, "search_pipeline": pipeline}, **kwargs
    )


def _time_given(warnings: list[str], name: str) -> float:
    (given,) = [float(w.split(" had ")[1].removesuffix("s")) for w in warnings if w.startswith(f"{name} had ")]
    return given


def test_each_processor_gets_its_weighted_share_of_what_is_left(url: str, client: httpx.Client) -> None:
    pipeline = {
        "budget_s": 4,
        "response_processors": [
            {"sleep": {"tag": "slow", "seconds": 60, "ignore_failure": True}},
            {"sleep": {"tag": "next"}},
        ],
    }
    started = time.perf_counter()
    response = _search(client, url, pipeline)
    elapsed = time.perf_counter() - started
    assert response.status_code == 200, response.text
    warnings = response.json()["ext"]["answerbox"]["warnings"]
    # Two processors of weight 1: the first gets half of 4 s, and times out there...
    assert 1.5 < _time_given(warnings, "sleep:slow") <= 2.0
    assert any("[sleep:slow] failed" in w and "share of the pipeline's budget" in w for w in warnings)
    # ...the second gets what is left, not nothing.
    assert 1.0 < _time_given(warnings, "sleep:next") <= 2.1
    assert response.json()["hits"]["hits"]
    assert elapsed < 4


def test_a_budget_above_the_limit_is_refused(url: str, client: httpx.Client) -> None:
    response = client.put(f"{url}/_search/pipeline/long", json={"budget_s": 21, "response_processors": [{"sleep": {}}]})
    assert response.status_code == 400
    assert "[budget_s] 21 is above limits.pipeline_budget_s (20)" in response.json()["error"]["reason"]


def test_a_caller_that_disconnects_stops_its_search(url: str, client: httpx.Client) -> None:
    Sleep.cancelled.clear()
    with pytest.raises(httpx.ReadTimeout):
        _search(client, url, {"response_processors": [{"sleep": {"tag": "held", "seconds": 15}}]}, timeout=1.0)
    deadline = time.monotonic() + 5
    while not Sleep.cancelled and time.monotonic() < deadline:
        time.sleep(0.05)
    assert Sleep.cancelled == ["sleep:held"]
