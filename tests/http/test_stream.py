"""``POST /{index}/_answerbox/stream``: hits first, then the checked sentences, then the checked answer.
What it refuses before any search starts is told in-process (tests/unit/http/test_stream.py)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory
from tests.support.books import QUESTION, answer_search
from tests.support.processors import registry_with_test_processors
from tests.support.scripted_llm import ScriptedLLM
from tests.support.servers import serve

Event = tuple[str, Any, float]


def stream(client: httpx.Client, url: str, body: dict[str, Any], query: str = "") -> list[Event]:
    """(event name, data, seconds since the request) for every event of the stream."""
    started = time.perf_counter()
    events: list[Event] = []
    with client.stream("POST", f"{url}/books/_answerbox/stream{query}", json=body) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        name = ""
        for line in response.iter_lines():
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                events.append((name, json.loads(line.removeprefix("data: ")), time.perf_counter() - started))
    return events


def names(events: list[Event]) -> list[str]:
    return [name for name, _, _ in events]


class BreaksMidStream(ScriptedLLM):
    """Streams two words, then reports an error in the stream, as a crashing server would."""

    async def _chunks(self, text: str) -> AsyncIterator[str]:
        sent = 0
        async for chunk in super()._chunks(text):
            if sent == 2:
                yield 'data: {"error": {"message": "the model crashed", "type": "server_error"}}\n\n'
                return
            sent += 1
            yield chunk


def test_stream_sends_hits_then_checked_sentences_then_the_checked_answer(
    generative: tuple[ScriptedLLM, str],
    client: httpx.Client,
) -> None:
    scripted, url = generative
    scripted.replies = ["Dune was written by Frank Herbert [1, 2]. Herbert was born in Tacoma [3]."]
    scripted.delay_s = 1.0
    pipeline = answer_search()["search_pipeline"]
    assert client.put(f"{url}/_search/pipeline/answers", json=pipeline).status_code == 200
    body = {"query": {"match": {"text": QUESTION}}}
    events = stream(client, url, body, "?search_pipeline=answers")
    kinds = names(events)
    assert kinds[:3] == ["search", "hits", "snippet"]
    assert kinds[-2:] == ["answer", "done"]
    assert set(kinds[3:-2]) == {"sentence"}
    found, hits, snippet, answer = events[0][1], events[1][1], events[2][1], events[-2][1]
    # The reader's answer, scored, the moment it has one: before the LLM's first sentence.
    assert snippet["mode"] == "extractive"
    assert "Herbert" in snippet["text"]
    assert 0 < snippet["confidence"] < 1
    plain = client.post(f"{url}/books/_search?search_pipeline=answers", json=body).json()
    assert hits["hits"] == plain["hits"]
    assert hits["ext"]["answerbox"]["answer"] is None
    # The first event is OpenSearch's own answer, before any response processor ran.
    direct = client.post(f"{url}/books/_search", json=body).json()
    assert found == {"hits": direct["hits"]}
    # The hits do not wait for the LLM (which stalls a second before its first token).
    first_sentence = next(t for name, _, t in events if name == "sentence")
    assert first_sentence - events[1][2] > 0.5
    # Only the sentence that held up was ever sent; the Tacoma one never was.
    sentences = [data for name, data, _ in events if name == "sentence"]
    assert [(s["text"], s["verdict"]) for s in sentences] == [
        ("Dune was written by Frank Herbert [1, 2].", "supported")
    ]
    assert "Tacoma" not in json.dumps(events[3:-2])
    # The answer, too, is only what held up.
    assert answer["answer"]["text"] == "Dune was written by Frank Herbert [1, 2]."
    assert {(c["marker"], c["_id"]) for c in answer["answer"]["citations"]} == {(1, "novel"), (2, "author")}
    assert answer["citations"] == answer["answer"]["citations"]
    assert answer == {**plain["ext"]["answerbox"], "timings_ms": answer["timings_ms"]}


def test_llm_failure_mid_stream_sends_error_then_the_extractive_answer(
    books: OpenSearch,
    make_answerbox: AnswerboxFactory,
    client: httpx.Client,
) -> None:
    broken = BreaksMidStream(replies=["Frank Herbert wrote the novel Dune [2]."])
    with serve(broken.app()) as llm_url:
        url = make_answerbox(llm={"base_url": f"{llm_url}/v1"})
        events = stream(client, url, answer_search())
    # Two words came before the failure: no sentence was whole, so none was sent.
    assert names(events) == ["search", "hits", "snippet", "error", "answer", "done"]
    error, answer = events[3][1], events[4][1]
    assert error["status"] == 502
    assert error["error"]["type"] == "llm_exception"
    # The provider's own words stay in answerbox's log.
    assert error["error"]["reason"].startswith("the LLM")
    assert "the model crashed" not in str(events)
    assert answer["answer"]["mode"] == "extractive"
    assert "Herbert" in answer["answer"]["text"]
    assert any("the LLM failed" in w for w in answer["warnings"])


def test_without_an_llm_the_stream_has_no_sentences(
    books: OpenSearch,
    make_answerbox: AnswerboxFactory,
    client: httpx.Client,
) -> None:
    url = make_answerbox()
    events = stream(client, url, answer_search())
    assert names(events) == ["search", "hits", "snippet", "answer", "done"]
    snippet, answer = events[2][1], events[3][1]["answer"]
    assert answer["mode"] == "extractive"
    assert snippet == answer


@pytest.mark.parametrize("ignore", [True, False])
def test_the_stream_runs_the_response_processors_through_the_engine(
    books: OpenSearch,
    make_answerbox: AnswerboxFactory,
    client: httpx.Client,
    ignore: bool,
) -> None:
    """The same path as _search: a failing processor is skipped with ignore_failure, and fails
    the answer (told as an error event, the stream still ends) without it."""
    url = make_answerbox(registry_with_test_processors())
    body = answer_search()
    body["search_pipeline"]["response_processors"].insert(0, {"explode": {"tag": "x", "ignore_failure": ignore}})
    events = stream(client, url, body)
    if ignore:
        assert names(events) == ["search", "hits", "snippet", "answer", "done"]
        assert any("explode:x" in w for w in events[3][1]["warnings"])
        assert events[3][1]["answer"]["abstained"] is False
    else:
        assert names(events) == ["search", "error", "answer", "done"]
        error = events[1][1]
        assert error["error"]["type"] == "search_pipeline_exception"
        assert "explode:x" in error["error"]["reason"]
        assert events[2][1]["answer"] is None


def test_the_stream_honours_the_pipelines_budget(
    books: OpenSearch,
    make_answerbox: AnswerboxFactory,
    client: httpx.Client,
) -> None:
    """A processor past its share of ``budget_s`` times out as in _search; skipped with
    ignore_failure, it leaves the rest of the budget to the answer."""
    url = make_answerbox(registry_with_test_processors())
    body = answer_search()
    body["search_pipeline"]["budget_s"] = 9  # sleep weighs 1, cited_answer 2: a 3 s share
    body["search_pipeline"]["response_processors"].insert(0, {"sleep": {"seconds": 60, "ignore_failure": True}})
    started = time.perf_counter()
    events = stream(client, url, body)
    assert names(events) == ["search", "hits", "snippet", "answer", "done"]
    report = events[3][1]
    assert any(
        w.startswith("processor [sleep] failed") and "share of the pipeline's budget" in w for w in report["warnings"]
    )
    assert report["answer"]["abstained"] is False
    assert report["answer"]["mode"] == "extractive"
    assert time.perf_counter() - started < 9
