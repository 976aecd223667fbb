"""A client with compression on (opensearch-py's ``http_compress``, which gzips every request body)
gets its pipelines run as any other client does; a body that does not inflate within the limits
is refused in OpenSearch's shape, and a compressed search that runs no pipeline goes on as it came.
A pipeline's answer comes gzipped to a caller that accepts gzip, as OpenSearch's own do."""

from __future__ import annotations

import gzip
import json
from typing import Any

import httpx
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory
from tests.support.books import QUESTION, answer_search
from tests.unit.asgi import opensearch_error

EXTRACTIVE = {"fields": {"date": "published"}, "current_date": "2026-11-22", "min_confidence": 0}
GZIP = {"content-type": "application/json", "content-encoding": "gzip"}


def _answer(found: dict[str, Any]) -> dict[str, Any]:
    answer: dict[str, Any] = found["ext"]["answerbox"]["answer"]
    assert answer["text"]
    return answer


def test_a_client_with_compression_on_gets_its_pipelines(books: OpenSearch, answerbox: str) -> None:
    compressing = OpenSearch(hosts=[answerbox], http_compress=True)
    pipeline = {"response_processors": [{"cited_answer": EXTRACTIVE}]}
    compressing.transport.perform_request("PUT", "/_search/pipeline/answers", body=pipeline)
    query = {"query": {"match": {"text": QUESTION}}}

    named = compressing.search(index="books", body=query, params={"search_pipeline": "answers"})
    inline = compressing.search(index="books", body=answer_search(prefer="confident"))
    lines = compressing.msearch(index="books", body=[{}, answer_search(prefer="confident"), {}, query])
    plain = compressing.search(index="books", body=query)

    assert _answer(named)["mode"] == _answer(inline)["mode"] == "extractive"
    first, second = lines["responses"]
    assert _answer(first)["text"] == _answer(inline)["text"]
    for plain_search in (second, plain):  # the plain one sent on compressed, as it came
        assert "ext" not in plain_search
        assert plain_search["hits"]["total"]["value"] == 3


def test_a_body_over_the_limit_once_inflated_is_refused(
    books: OpenSearch, make_answerbox: AnswerboxFactory, client: httpx.Client
) -> None:
    url = make_answerbox(limits={"max_request_bytes": 4096})
    body = json.dumps({**answer_search(), "padding": " " * 8192}).encode()
    refused = client.post(f"{url}/books/_search", content=gzip.compress(body), headers=GZIP)
    opensearch_error(refused, 413, "content_too_long_exception")


def test_a_body_that_does_not_inflate_is_a_parse_error(books: OpenSearch, answerbox: str, client: httpx.Client) -> None:
    cut = gzip.compress(json.dumps(answer_search()).encode())[:-12]
    refused = client.post(f"{answerbox}/books/_search", content=cut, headers=GZIP)
    assert "cut off" in opensearch_error(refused, 400, "parsing_exception")


def test_a_pipeline_s_answer_is_gzipped_for_a_caller_that_accepts_it(books: OpenSearch, answerbox: str) -> None:
    msearch = "".join(json.dumps(line) + "\n" for line in [{}, answer_search(prefer="confident")])
    sent = [("_search", json.dumps(answer_search(prefer="confident")), "application/json")]
    sent.append(("_msearch", msearch, "application/x-ndjson"))
    answers: dict[str, list[tuple[httpx.Headers, bytes]]] = {}
    with httpx.Client(timeout=60) as client:
        for accept in ("gzip, deflate", "identity", "gzip;q=0, *"):
            answers[accept] = []
            for endpoint, body, content_type in sent:
                asked = {"accept-encoding": accept, "content-type": content_type}
                with client.stream("POST", f"{answerbox}/books/{endpoint}", content=body, headers=asked) as answer:
                    assert answer.status_code == 200
                    answers[accept].append((answer.headers, b"".join(answer.iter_raw())))  # as sent, not inflated
    for headers, raw in answers["gzip, deflate"]:
        assert headers["content-encoding"] == "gzip"
        assert "answerbox" in json.dumps(json.loads(gzip.decompress(raw)))
    for refused in ("identity", "gzip;q=0, *"):
        for headers, raw in answers[refused]:
            assert "content-encoding" not in headers
            assert "answerbox" in json.dumps(json.loads(raw))
