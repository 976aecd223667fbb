"""Over real HTTP, through a small security proxy in front of osmem-server: a caller who sends
no credentials to a cluster with a security plugin is refused (OpenSearch's 401) before any
processor runs. Its request processors once ran first, whatever they spent (a custom one's
work, an LLM call where a processor checks nothing first), and only the search itself reached
OpenSearch and was refused."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index
from tests.support.auth_proxy import AuthProxy, User, basic
from tests.support.processors import RecordRequest, registry_with_test_processors
from tests.support.servers import serve

PIPELINE: dict[str, Any] = {"request_processors": [{"record_request": {}}]}
READER = basic("reader", "r")


@pytest.fixture
def url(make_answerbox: AnswerboxFactory, opensearch: OpenSearch, osmem_url: str) -> Iterator[str]:
    bulk_index(opensearch, "books", [{"_id": "dune", "body": "Spice is mined on Arrakis."}])
    users = {
        "reader": User("r", read=("books",)),
        "service": User("s", read=("*",), write=(".answerbox-pipelines", ".answerbox-cache")),
    }
    RecordRequest.ran.clear()
    with serve(AuthProxy(osmem_url, users).app()) as cluster:
        yield make_answerbox(
            registry_with_test_processors(),
            opensearch={"url": cluster, "service_username": "service", "service_password": "s"},
        )


def test_a_caller_without_credentials_runs_no_processor(url: str, client: httpx.Client) -> None:
    body = {"query": {"match": {"body": "spice"}}, "search_pipeline": PIPELINE}
    refused = client.post(f"{url}/books/_search", json=body)
    assert refused.status_code == 401, refused.text
    assert refused.json()["error"]["type"] == "security_exception"
    lines = json.dumps({}) + "\n" + json.dumps(body) + "\n"
    msearch = client.post(f"{url}/books/_msearch", content=lines, headers={"content-type": "application/x-ndjson"})
    assert msearch.status_code == 401, msearch.text
    assert RecordRequest.ran == []
    answered = client.post(f"{url}/books/_search", json=body, headers=READER)
    assert answered.status_code == 200, answered.text
    assert [h["_id"] for h in answered.json()["hits"]["hits"]] == ["dune"]
    assert RecordRequest.ran == ["spice"]
