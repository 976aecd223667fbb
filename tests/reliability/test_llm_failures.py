"""An LLM that breaks the protocol in its stream degrades the answer, never the search: a chunk
that is not JSON is told as an error event, then the reader's answer follows. The rest (a
choice without a message, a body that is not JSON, a server that drips its reply) is told
in-process (tests/unit/reliability/test_llm_failures.py)."""

from __future__ import annotations

import httpx
import pytest
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index
from tests.support.scripted_llm import ScriptedLLM

DOCS = [
    {"_id": "dune", "text": "Spice is mined on the desert planet Arrakis."},
    {"_id": "emma", "text": "A comedy of manners."},
]


@pytest.fixture
def llm(
    scripted_llm: tuple[ScriptedLLM, str], opensearch: OpenSearch, make_answerbox: AnswerboxFactory
) -> tuple[ScriptedLLM, str]:
    bulk_index(opensearch, "books", [dict(d) for d in DOCS])
    scripted, llm_url = scripted_llm
    return scripted, make_answerbox(llm={"base_url": llm_url, "timeout_s": 1})


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
    # The text before the broken chunk is no whole sentence, so nothing of it is sent; the LLM's
    # failure is told, then the fallback answer follows.
    assert events == ["search", "hits", "snippet", "error", "answer", "done"]
