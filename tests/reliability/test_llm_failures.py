"""An LLM that breaks the protocol degrades the answer, never the search: a choice without a
message, a body that is not JSON, a stream chunk that is not JSON, and a server that drips
its reply a byte at a time (each read is quick, the whole never ends)."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index
from tests.support.scripted_llm import ScriptedLLM

DOCS = [
    {"_id": "dune", "text": "Spice is mined on the desert planet Arrakis."},
    {"_id": "emma", "text": "A comedy of manners."},
]
EXPAND = {"request_processors": [{"llm_query_expansion": {"timeout_s": 5}}]}
BROKEN = {
    "no message": b'{"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": [{"index": 0, '
    b'"finish_reason": "stop"}]}',
    "not json": b"<html>502 Bad Gateway</html>",
}


@pytest.fixture
def llm(
    scripted_llm: tuple[ScriptedLLM, str], opensearch: OpenSearch, make_answerbox: AnswerboxFactory
) -> tuple[ScriptedLLM, str]:
    bulk_index(opensearch, "books", [dict(d) for d in DOCS])
    scripted, llm_url = scripted_llm
    return scripted, make_answerbox(llm={"base_url": llm_url, "timeout_s": 1})


@pytest.mark.parametrize("reply", BROKEN.values(), ids=BROKEN.keys())
def test_a_malformed_completion_falls_back(llm: tuple[ScriptedLLM, str], client: httpx.Client, reply: bytes) -> None:
    scripted, url = llm
    scripted.raw = reply
    response = client.post(
        f"{url}/books/_search", json={"query": {"match": {"text": "spice"}}, "search_pipeline": EXPAND}
    )
    assert response.status_code == 200, response.text
    assert [h["_id"] for h in response.json()["hits"]["hits"]] == ["dune"]
    report = response.json()["ext"]["answerbox"]
    assert report["query_expansion"]["fallback"] is True
    assert any("the LLM sent a malformed reply" in w or "returned no text" in w for w in report["warnings"]), report[
        "warnings"
    ]


def test_a_stream_chunk_that_is_not_json_degrades_the_answer(
    llm: tuple[ScriptedLLM, str], client: httpx.Client
) -> None:
    scripted, url = llm
    scripted.raw = b'data: {"id": "x", "choices": [{"index": 0, "delta": {"content": "Spice"}}]}\n\ndata: {not json\n\n'
    pipeline = {
        "response_processors": [{"cited_answer": {"size": 2, "skip_llm_above": 1}}]
    }  # the LLM is asked whatever the snippet
    body = {"query": {"match": {"text": "spice"}}, "search_pipeline": pipeline}
    with client.stream("POST", f"{url}/books/_answerbox/stream", json=body) as response:
        events = [line.removeprefix("event: ") for line in response.iter_lines() if line.startswith("event: ")]
    assert response.status_code == 200
    assert events[:3] == ["search", "hits", "snippet"]
    assert events[-2:] == ["answer", "done"]
    assert "error" in events  # the LLM's failure is told, then the fallback answer follows


def test_a_dripping_server_is_cut_off_at_the_timeout(llm: tuple[ScriptedLLM, str], client: httpx.Client) -> None:
    scripted, url = llm
    scripted.drip_s = 0.05  # each byte comes quickly; the ~300-byte reply takes 15 s
    pipeline: dict[str, Any] = {
        "response_processors": [{"retrieval_evaluator": {"upper": 0.99, "lower": 0.98, "corrective": {}}}]
    }
    started = time.monotonic()
    ext = {"generative_qa_parameters": {"llm_question": "Where is spice mined?"}}
    response = client.post(
        f"{url}/books/_search", json={"query": {"match_all": {}}, "search_pipeline": pipeline, "ext": ext}
    )
    assert time.monotonic() - started < 10
    assert response.status_code == 200, response.text
    retrieval = response.json()["ext"]["answerbox"]["retrieval"]
    assert retrieval["verdict"] == "incorrect"
    assert retrieval["corrective"]["keywords_source"] == "fallback"
    assert any("did not answer within" in w for w in response.json()["ext"]["answerbox"]["warnings"])
