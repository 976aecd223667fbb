"""Over real HTTP: a processor's exception text (which can name files, hosts or a document's
words) reaches no caller. The verbose results, the warnings and the error each say what
failed in a fixed sentence; the exception, text and traceback, goes to the log."""

from __future__ import annotations

import logging

import httpx
import pytest
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index
from tests.support.processors import DOCS, QUERY, Explode, registry_with_test_processors

UNEXPECTED = "it failed unexpectedly (the server's log has the details)"


@pytest.fixture
def url(make_answerbox: AnswerboxFactory, opensearch: OpenSearch) -> str:
    bulk_index(opensearch, "books", [dict(d) for d in DOCS])
    return make_answerbox(registry=registry_with_test_processors())


def test_a_skipped_processor_is_told_in_a_fixed_sentence(
    url: str, client: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    body = {**QUERY, "search_pipeline": {"response_processors": [{"explode": {"tag": "x", "ignore_failure": True}}]}}
    with caplog.at_level(logging.WARNING, logger="answerbox.pipeline.run.pipeline"):
        response = client.post(f"{url}/books/_search?verbose_pipeline=true", json=body)
    assert response.status_code == 200, response.text
    assert "boom" not in response.text
    assert "10.0.0.7" not in response.text
    answer = response.json()
    assert answer["processor_results"][0]["error"] == UNEXPECTED
    assert answer["ext"]["answerbox"]["warnings"] == [f"processor [explode:x] failed and was skipped: {UNEXPECTED}"]
    logged = [r for r in caplog.records if "explode:x" in r.getMessage()]
    assert logged
    assert logged[0].exc_info is not None
    assert Explode.secret in logged[0].getMessage()


def test_a_failed_processor_error_is_told_in_a_fixed_sentence(url: str, client: httpx.Client) -> None:
    body = {**QUERY, "search_pipeline": {"response_processors": [{"explode": {"tag": "x"}}]}}
    response = client.post(f"{url}/books/_search", json=body)
    assert response.status_code == 500
    assert "boom" not in response.text
    assert "RuntimeError" not in response.text
    error = response.json()["error"]
    assert error["type"] == "search_pipeline_exception"
    assert error["reason"] == f"processor [explode:x] failed: {UNEXPECTED}"
