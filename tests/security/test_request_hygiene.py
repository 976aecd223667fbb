"""What a request may not do to answerbox or through it that needs real HTTP: hold a connection
with a huge body (answered with a 413, not a reset), or claim a proxy-given identity on its way
to OpenSearch through the passthrough. The rest (cross-site forms, a body that does not arrive,
more hits than answerbox reads, errors naming hosts or an LLM provider's words) is told
in-process (tests/unit/security/test_request_hygiene.py)."""

from __future__ import annotations

import json
import socket
from typing import Any

import httpx
import pytest
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, RecordedFactory, bulk_index

INLINE = {
    "search_pipeline": {"response_processors": [{"cited_answer": {"size": 2, "mode": "extractive"}}]},
    "query": {"match": {"body": "spice"}},
}


@pytest.fixture
def url(make_answerbox: AnswerboxFactory, opensearch: OpenSearch) -> str:
    bulk_index(opensearch, "books", [{"_id": "dune", "body": "Spice is mined on Arrakis."}])
    return make_answerbox()


def test_a_body_over_the_limit_gets_a_413_not_a_reset(url: str, client: httpx.Client) -> None:
    """A client writes its whole body before it reads: refused unread, it got a reset connection."""
    body = json.dumps({**INLINE, "pad": "x" * 12 * 1024 * 1024}).encode()  # 12 MB, over the 10 MB default
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        head = (
            f"POST /books/_search HTTP/1.1\r\nHost: {host}\r\ncontent-type: application/json\r\ncontent-length: "
            f"{len(body)}\r\n\r\n"
        )
        sock.sendall(head.encode())
        for start in range(0, len(body), 1 << 20):
            sock.sendall(body[start : start + (1 << 20)])
        answer = sock.recv(65536).decode()
    assert answer.startswith("HTTP/1.1 413")
    assert "content_too_long_exception" in answer
    assert client.post(f"{url}/books/_search", json=INLINE).status_code == 200


def test_the_passthrough_drops_hop_by_hop_and_proxy_identity_headers(
    recorded_answerbox: RecordedFactory, client: httpx.Client
) -> None:
    """A cluster whose proxy authentication trusts answerbox's address would otherwise take a
    caller's own x-proxy-user as who it is."""
    recorder, url = recorded_answerbox()
    headers: dict[str, Any] = {
        "authorization": "Basic YWxpY2U6eA==",
        "x-proxy-user": "admin",
        "x-proxy-roles": "all_access",
        "x-forwarded-for": "10.0.0.1",
        "x-forwarded-proto": "https",
        "connection": "keep-alive, x-private",
        "x-private": "for the next hop only",
        "x-kept": "yes",
    }
    assert client.get(f"{url}/_cat/indices", headers=headers).status_code == 200
    (forwarded,) = recorder.matching("/_cat/indices")
    sent = {name.lower() for name in forwarded.headers}
    assert not sent & {"x-proxy-user", "x-proxy-roles", "x-forwarded-for", "x-forwarded-proto", "x-private"}
    assert forwarded.headers["authorization"] == headers["authorization"]
    assert forwarded.headers["x-kept"] == "yes"


@pytest.mark.parametrize("endpoint", ["_search", "_msearch"])
def test_a_body_in_the_url_runs_no_pipeline_even_the_indexs_default(
    recorded_answerbox: RecordedFactory, opensearch: OpenSearch, client: httpx.Client, endpoint: str
) -> None:
    """On an index with a default answerbox pipeline, a search in OpenSearch's ``source``
    parameter opened a run of an empty body, whose search OpenSearch refused (both a body and
    ``source``): a 400. It goes to OpenSearch as sent, as with no default."""
    bulk_index(opensearch, "books", [{"_id": "dune", "body": "Spice is mined on Arrakis."}])
    recorder, url = recorded_answerbox()
    stored = {"response_processors": [{"cited_answer": {"size": 2, "mode": "extractive"}}]}
    assert client.put(f"{url}/_search/pipeline/answers", json=stored).status_code == 200
    settings = {"index.search.default_pipeline": "answers"}
    assert client.put(f"{url}/books/_settings", json=settings).status_code == 200
    search = {"query": {"match": {"body": "spice"}}}
    source = json.dumps(search) if endpoint == "_search" else json.dumps({}) + "\n" + json.dumps(search) + "\n"
    params = {"source": source, "source_content_type": "application/json"}
    direct = opensearch.transport.perform_request("GET", f"/books/{endpoint}", params=params)
    response = client.get(f"{url}/books/{endpoint}", params=params)
    assert response.status_code == 200, response.text
    answer = response.json() if endpoint == "_search" else response.json()["responses"][0]
    assert "ext" not in answer
    hits = answer["hits"]
    expected = direct["hits"] if endpoint == "_search" else direct["responses"][0]["hits"]
    assert [h["_id"] for h in hits["hits"]] == [h["_id"] for h in expected["hits"]] == ["dune"]
    (sent,) = recorder.matching(f"/books/{endpoint}")
    assert (sent.method, sent.body) == ("GET", b"")
