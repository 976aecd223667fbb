"""The books corpus that cited_answer's and the stream's end-to-end tests search: its documents,
the fixtures that index them (and an answerbox with the scripted LLM), and the search they send.
Registered as a pytest plugin by ``tests/conftest.py``."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index
from tests.support.scripted_llm import ScriptedLLM

BOOKS = [
    {
        "_id": "novel",
        "title": "Dune",
        "text": "Dune is a 1965 science fiction novel by Frank Herbert. It was first published by Chilton Books.",
        "published": "2015-03-01",
    },
    {
        "_id": "author",
        "title": "Frank Herbert",
        "text": "Frank Herbert was an American science fiction author. Herbert wrote Dune and five sequels.",
        "published": "2019-06-10",
    },
    {
        "_id": "film",
        "title": "Dune (2021 film)",
        "text": "Dune is a 2021 film directed by Denis Villeneuve. The film adapts the 1965 novel Dune.",
        "published": "2021-10-22",
    },
]
MAPPINGS = {"properties": {"title": {"type": "text"}, "text": {"type": "text"}, "published": {"type": "date"}}}
# "Who wrote Dune?" is ambiguous here: the film's director co-wrote it, and the readers split on it.
QUESTION = "Who wrote the science fiction novel Dune?"


@pytest.fixture
def books(opensearch: OpenSearch) -> OpenSearch:
    bulk_index(opensearch, "books", [dict(d) for d in BOOKS], MAPPINGS)
    return opensearch


@pytest.fixture
def generative(
    books: OpenSearch, scripted_llm: tuple[ScriptedLLM, str], make_answerbox: AnswerboxFactory
) -> tuple[ScriptedLLM, str]:
    """The scripted LLM and an answerbox that uses it, over the books."""
    scripted, llm_url = scripted_llm
    return scripted, make_answerbox(llm={"base_url": llm_url, "allowed_models": ["other-model"]})


def answer_search(question: str = QUESTION, ext: dict[str, Any] | None = None, **config: Any) -> dict[str, Any]:
    """A search whose inline pipeline is just ``cited_answer`` (dates from ``published``, a fixed
    today); unless ``config`` says otherwise, the LLM is always asked, its held-up answer kept,
    and no answer is held back for its confidence (``test_answer_confidence`` tests those)."""
    processor = {
        "fields": {"date": "published"},
        "current_date": "2026-11-22",
        "prefer": "generative",
        "min_confidence": 0,
        **config,
    }
    body: dict[str, Any] = {
        "query": {"match": {"text": question}},
        "search_pipeline": {"response_processors": [{"cited_answer": processor}]},
    }
    if ext:
        body["ext"] = ext
    return body


def search(client: httpx.Client, url: str, body: dict[str, Any], index: str = "books") -> dict[str, Any]:
    response = client.post(f"{url}/{index}/_search", json=body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result
