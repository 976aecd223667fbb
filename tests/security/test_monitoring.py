"""Health, stats and metrics: their statuses and totals are anyone's (a probe, a scraper), what
names OpenSearch's address, the directories, the stored pipelines and the host is shown only to
callers OpenSearch lets monitor the cluster (``GET /_cluster/health`` with their credentials),
not to every user it authenticates; a burst of health calls costs the LLM one round of checks.
Over HTTP, through a small security proxy in front of osmem-server."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index
from tests.support.auth_proxy import AuthProxy, User, basic
from tests.support.processors import registry_with_test_processors
from tests.support.recording_proxy import RecordingProxy
from tests.support.scripted_llm import ScriptedLLM
from tests.support.servers import serve

ADMIN, READER, WRONG = basic("admin", "a"), basic("reader", "r"), basic("reader", "not-the-password")
PIPELINE = {"response_processors": [{"label_hits": {"label": "seen", "tag": "quarterly-tag"}}]}
STATS = "/_answerbox/stats/search_pipeline"


@dataclass(frozen=True)
class Stack:
    url: str
    opensearch: str  # the address answerbox is configured with
    llm: RecordingProxy  # every request that reached the LLM


@pytest.fixture
def stack(
    make_answerbox: AnswerboxFactory, opensearch: OpenSearch, osmem_url: str, scripted_llm: tuple[ScriptedLLM, str]
) -> Iterator[Stack]:
    bulk_index(opensearch, "books", [{"_id": "dune", "body": "Spice is mined on Arrakis."}])
    users = {
        "admin": User("a", write=("*",)),
        "reader": User("r", read=("books",)),
        "service": User("s", read=("*",), write=(".answerbox-pipelines", ".answerbox-cache")),
    }
    recorder = RecordingProxy(scripted_llm[1].removesuffix("/v1"))
    with serve(AuthProxy(osmem_url, users).app()) as cluster, serve(recorder.app()) as llm:
        url = make_answerbox(
            registry_with_test_processors(),
            opensearch={"url": cluster, "service_username": "service", "service_password": "s"},
            llm={"base_url": f"{llm}/v1"},
        )
        yield Stack(url, cluster, recorder)


def test_health_shows_its_details_only_to_callers_who_may_monitor_the_cluster(
    stack: Stack, client: httpx.Client
) -> None:
    """The reader is a user OpenSearch knows, with no cluster right: it saw every detail before."""
    address = stack.opensearch.removeprefix("http://")
    for headers in ({}, WRONG, READER):
        public = client.get(f"{stack.url}/_answerbox/health", headers=headers)
        assert public.status_code == 200, public.text  # the probe's answer is unchanged
        body: dict[str, Any] = public.json()
        assert body["status"] == "yellow"  # the scripted LLM has no structured output
        assert {c["check"]: c["status"] for c in body["checks"]}["opensearch"] == "ok"
        assert all(set(check) == {"check", "status"} for check in body["checks"])
        for named in (address, "holds every prompt", "onnx_models"):  # OpenSearch, the templates, the models
            assert named not in public.text
    for headers in (ADMIN,):  # a user OpenSearch lets monitor the cluster, as for its own node stats
        full = client.get(f"{stack.url}/_answerbox/health", headers=headers).json()
        details = {c["check"]: c["detail"] for c in full["checks"]}
        assert address in details["opensearch"]
        assert details["templates"].endswith("holds every prompt")
        assert "onnx_models" in details["models"]


def test_a_burst_of_health_calls_asks_the_llm_once(stack: Stack) -> None:
    def health(_: int) -> int:
        return httpx.get(f"{stack.url}/_answerbox/health", timeout=60).status_code

    before = len(stack.llm.requests)
    with ThreadPoolExecutor(10) as pool:  # at once: one round of checks in flight
        assert set(pool.map(health, range(20))) == {200}
    assert {health(i) for i in range(20)} == {200}  # one after the other: the round is still fresh
    # One round: the model list and the structured-output probes (a JSON schema, then a JSON object).
    assert len(stack.llm.requests) - before <= 3, [(r.method, r.path) for r in stack.llm.requests]


def test_stats_and_metrics_name_pipelines_and_the_host_only_to_callers_who_may_monitor_the_cluster(
    stack: Stack, client: httpx.Client
) -> None:
    stored = client.put(f"{stack.url}/_search/pipeline/quarterly-results", json=PIPELINE, headers=ADMIN)
    assert stored.status_code == 200
    body = {"query": {"match": {"body": "spice"}}}
    found = client.post(f"{stack.url}/books/_search?search_pipeline=quarterly-results", json=body, headers=READER)
    assert found.status_code == 200, found.text
    host = socket.gethostname()

    for headers in ({}, WRONG, READER):
        stats = client.get(f"{stack.url}{STATS}", headers=headers)
        assert stats.status_code == 200  # what the Kubernetes probes ask
        ((node_id, node),) = stats.json()["nodes"].items()
        assert node_id != host
        assert not {"host", "name"} & set(node)
        assert "quarterly" not in stats.text
        assert node["search_pipeline"]["total_response"]["count"] == 1
        totals = client.get(f"{stack.url}/metrics", headers=headers)
        assert totals.status_code == 200
        assert not re.search(r"quarterly|pipeline=", totals.text)
        assert 'answerbox_pipeline_runs_total{phase="response"} 1.0' in totals.text
        assert 'answerbox_processor_seconds_count{type="label_hits"} 1.0' in totals.text

    for headers in (ADMIN,):
        ((_, node),) = client.get(f"{stack.url}{STATS}", headers=headers).json()["nodes"].items()
        assert node["host"] == host
        pipeline = node["search_pipeline"]["pipelines"]["quarterly-results"]
        assert [list(p) for p in pipeline["response_processors"]] == [["label_hits:quarterly-tag"]]
        metrics = client.get(f"{stack.url}/metrics", headers=headers).text
        assert 'answerbox_pipeline_runs_total{phase="response",pipeline="quarterly-results"} 1.0' in metrics
