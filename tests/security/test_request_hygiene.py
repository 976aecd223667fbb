"""What a request may not do to answerbox or through it, each over real HTTP: post a
pipeline search from a cross-site form, hold a connection with a slow or huge body, ask for
more hits than answerbox reads, learn internal hosts or an LLM provider's words from an
error, or claim a proxy-given identity on its way to OpenSearch."""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import httpx
import pytest
from answerbox.server import free_port
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index
from tests.support.recording_proxy import RecordingProxy
from tests.support.scripted_llm import ScriptedLLM
from tests.support.servers import serve

INLINE = {
    "search_pipeline": {"response_processors": [{"cited_answer": {"size": 2, "mode": "extractive"}}]},
    "query": {"match": {"body": "spice"}},
}


@pytest.fixture
def url(make_answerbox: AnswerboxFactory, opensearch: OpenSearch) -> str:
    bulk_index(opensearch, "books", [{"_id": "dune", "body": "Spice is mined on Arrakis."}])
    return make_answerbox(limits={"body_timeout_s": 1})


def _shaped(response: httpx.Response, status: int, error_type: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["status"] == status
    assert body["error"]["type"] == error_type
    assert body["error"]["root_cause"][0]["type"] == error_type
    return str(body["error"]["reason"])


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""]
)
def test_a_pipeline_search_from_a_cross_site_form_is_refused(url: str, client: httpx.Client, content_type: str) -> None:
    """A form can post text/plain across sites with the browser's cached credentials; OpenSearch
    refuses such a body (406), and so does answerbox before it runs a pipeline."""
    headers = {"content-type": content_type} if content_type else {}
    body = json.dumps(INLINE).encode()
    _shaped(client.post(f"{url}/books/_search", content=body, headers=headers), 406, "illegal_argument_exception")
    msearch = json.dumps({}) + "\n" + json.dumps(INLINE) + "\n"
    _shaped(client.post(f"{url}/books/_msearch", content=msearch, headers=headers), 406, "illegal_argument_exception")
    assert client.post(f"{url}/books/_search", json=INLINE).status_code == 200
    assert (
        client.post(
            f"{url}/books/_msearch", content=msearch, headers={"content-type": "application/x-ndjson"}
        ).status_code
        == 200
    )


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


def test_a_body_that_does_not_arrive_in_time_is_a_408(url: str) -> None:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        head = (
            f"POST /books/_search HTTP/1.1\r\nHost: {host}\r\ncontent-type: application/json\r\ncontent-length: "
            f"1000\r\n\r\n"
        )
        sock.sendall(head.encode() + b'{"query": ')
        started = time.monotonic()
        answer = sock.recv(65536).decode()
    assert answer.startswith("HTTP/1.1 408")
    assert "timeout_exception" in answer
    assert time.monotonic() - started < 5


def test_a_pipeline_search_may_not_ask_for_more_hits_than_answerbox_reads(url: str, client: httpx.Client) -> None:
    for body, params in (
        ({**INLINE, "size": 5000}, ""),
        ({**INLINE, "from": 900, "size": 200}, ""),
        (INLINE, "?size=2000"),
    ):
        reason = _shaped(client.post(f"{url}/books/_search{params}", json=body), 400, "illegal_argument_exception")
        assert "limits.max_search_size" in reason
    assert client.post(f"{url}/books/_search", json={**INLINE, "size": 100}).status_code == 200


def test_errors_name_no_internal_host(make_answerbox: AnswerboxFactory, client: httpx.Client) -> None:
    port = free_port()
    url = make_answerbox(opensearch={"url": f"http://127.0.0.1:{port}", "connect_timeout_s": 1})
    for response in (client.get(f"{url}/_cat/indices"), client.post(f"{url}/books/_search", json=INLINE)):
        reason = _shaped(response, 502, "connect_exception")
        assert reason == "OpenSearch is unreachable"
        assert str(port) not in response.text


def test_warnings_never_repeat_an_llm_providers_words(
    make_answerbox: AnswerboxFactory,
    opensearch: OpenSearch,
    scripted_llm: tuple[ScriptedLLM, str],
    client: httpx.Client,
) -> None:
    llm, llm_url = scripted_llm
    llm.fail, llm.fail_status = True, 401
    bulk_index(opensearch, "books", [{"_id": "dune", "body": "Spice is mined on Arrakis."}])
    url = make_answerbox(llm={"base_url": llm_url})
    pipeline = {
        "request_processors": [{"llm_query_expansion": {}}],
        "response_processors": [{"cited_answer": {"size": 2}}],
    }
    response = client.post(
        f"{url}/books/_search", json={"search_pipeline": pipeline, "query": {"match": {"body": "spice"}}}
    )
    assert response.status_code == 200
    assert response.json()["hits"]["hits"]
    warnings = response.json()["ext"]["answerbox"]["warnings"]
    assert any("answered 401" in w for w in warnings), warnings
    assert "scripted failure" not in response.text


def test_the_passthrough_drops_hop_by_hop_and_proxy_identity_headers(
    make_answerbox: AnswerboxFactory, osmem_url: str, client: httpx.Client
) -> None:
    """A cluster whose proxy authentication trusts answerbox's address would otherwise take a
    caller's own x-proxy-user as who it is."""
    recorder = RecordingProxy(osmem_url)
    with serve(recorder.app()) as hop:
        url = make_answerbox(opensearch={"url": hop})
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
