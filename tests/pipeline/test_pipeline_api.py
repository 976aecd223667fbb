"""The search-pipeline API: CRUD, persistence across processes, validation errors."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest
from answerbox.server import free_port

from tests.conftest import AnswerboxFactory
from tests.support.processors import registry_with_test_processors

LABEL = {
    "description": "labels hits",
    "version": 3,
    "response_processors": [{"label_hits": {"tag": "l1", "label": "seen"}}],
}


@pytest.fixture
def url(make_answerbox: AnswerboxFactory) -> str:
    return make_answerbox(registry=registry_with_test_processors())


def test_crud_round_trip(url: str, client: httpx.Client) -> None:
    assert client.put(f"{url}/_search/pipeline/labels", json=LABEL).json() == {"acknowledged": True}
    assert client.put(f"{url}/_search/pipeline/other", json={"request_processors": []}).status_code == 200
    assert client.get(f"{url}/_search/pipeline/labels").json() == {"labels": LABEL}
    assert set(client.get(f"{url}/_search/pipeline").json()) == {"labels", "other"}
    assert set(client.get(f"{url}/_search/pipeline/lab*").json()) == {"labels"}
    assert client.delete(f"{url}/_search/pipeline/labels").json() == {"acknowledged": True}
    missing = client.get(f"{url}/_search/pipeline/labels")
    assert missing.status_code == 404
    assert missing.json() == {}
    gone = client.delete(f"{url}/_search/pipeline/labels")
    assert gone.status_code == 404
    assert gone.json()["error"]["type"] == "resource_not_found_exception"


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"response_processors": [{"label_hits": {"label": "x", "colour": "red"}}]}, "colour"),
        ({"response_processors": [{"label_hits": {}}]}, "label"),
        ({"response_processors": [{"no_such_processor": {}}]}, "no_such_processor"),
        ({"response_processors": [{"label_hits": {"label": "x"}, "explode": {}}]}, "exactly one key"),
        ({"request_processors": [{"label_hits": {"label": "x"}}]}, "cannot be used in request_processors"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_invalid_pipeline_is_a_400_in_opensearch_shape(
    url: str, client: httpx.Client, body: dict[str, Any], fragment: str
) -> None:
    response = client.put(f"{url}/_search/pipeline/bad", json=body)
    assert response.status_code == 400
    error = response.json()
    assert error["status"] == 400
    assert error["error"]["type"] == error["error"]["root_cause"][0]["type"] == "illegal_argument_exception"
    assert fragment in error["error"]["reason"]
    assert client.get(f"{url}/_search/pipeline/bad").status_code == 404


def test_malformed_body_is_a_400_parse_error(url: str, client: httpx.Client) -> None:
    response = client.put(
        f"{url}/_search/pipeline/bad", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["error"]["root_cause"][0]["type"] == "parsing_exception"


def test_pipeline_survives_restart_and_is_shared_with_a_second_process(
    make_answerbox: AnswerboxFactory, osmem_url: str, client: httpx.Client
) -> None:
    first = make_answerbox()
    client.put(f"{first}/_search/pipeline/shared", json={"description": "kept in OpenSearch", "request_processors": []})
    port = free_port()
    env = {**os.environ, "ANSWERBOX_OPENSEARCH__URL": osmem_url, "ANSWERBOX_PORT": str(port)}
    process = subprocess.Popen([sys.executable, "-m", "answerbox.cli", "serve", "--log-level", "warning"], env=env)
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
