"""What answerbox accepts itself: pipeline ids validated as names OpenSearch stores are
(`_none`, which means "no pipeline" in a search, dot paths, control characters and
separators are refused), and bodies it reads only with a JSON content type."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.conftest import AnswerboxFactory

PIPELINE: dict[str, Any] = {"response_processors": [{"retrieval_evaluator": {}}]}


@pytest.mark.parametrize("raw_id", ["_none", "%2E%2E", "a%00b", "a%20b", "a,b", "a%23b", "x" * 256])
def test_invalid_ids_are_refused(make_answerbox: AnswerboxFactory, client: httpx.Client, raw_id: str) -> None:
    url = make_answerbox()
    response = client.put(httpx.URL(f"{url}/_search/pipeline/{raw_id}"), json=PIPELINE)
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["status"] == 400
    assert error["error"]["type"] == "illegal_argument_exception"
    assert error["error"]["reason"].startswith("invalid search pipeline id [")
    assert client.get(f"{url}/_search/pipeline").json() == {}


def test_ordinary_ids_are_kept(make_answerbox: AnswerboxFactory, client: httpx.Client) -> None:
    url = make_answerbox()
    for pipeline_id in ("answers", "answers-v2.1", "my_pipeline", "ümlaut"):
        assert client.put(f"{url}/_search/pipeline/{pipeline_id}", json=PIPELINE).status_code == 200
    assert sorted(client.get(f"{url}/_search/pipeline").json()) == ["answers", "answers-v2.1", "my_pipeline", "ümlaut"]


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_bodies_answerbox_reads_must_be_json(
    make_answerbox: AnswerboxFactory, client: httpx.Client, content_type: str | None
) -> None:
    """A cross-site form can post text/plain or a form, never JSON: such posts are refused."""
    url = make_answerbox()
    headers = {"content-type": content_type} if content_type else {}
    body = b'{"response_processors": [{"cited_answer": {}}]}'
    for response in (
        client.put(f"{url}/_search/pipeline/p", content=body, headers=headers),
        client.post(f"{url}/any/_answerbox/stream?search_pipeline=p", content=b"{}", headers=headers),
    ):
        assert response.status_code == 406, response.text
        assert response.json()["error"]["type"] == "illegal_argument_exception"
        assert "Content-Type header" in response.json()["error"]["reason"]
    assert client.get(f"{url}/_search/pipeline/p").status_code == 404
