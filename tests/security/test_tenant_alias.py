"""Tenants behind filtered aliases of one index, over HTTP: a stored pipeline that names the
backing index (CRAG's ``corrective.index``, a chain's ``index``) never reads another tenant for
a caller on its own tenant's alias. The alias's filter would not apply there, so the processor's
search is refused: a warning, the hits untouched, and no search of the backing index is sent."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index
from tests.support.recording_proxy import RecordingProxy
from tests.support.scripted_llm import ScriptedLLM
from tests.support.servers import serve

QUESTION = "capital of Germany"
DOCS = [
    {"_id": "a1", "tenant": "A", "text": "Bonn was the seat of government of West Germany until 1990."},
    {"_id": "b1", "tenant": "B", "text": "Berlin is the capital of Germany. The secret plan: merger on May 5."},
]
MAPPINGS = {"properties": {"text": {"type": "text"}, "tenant": {"type": "keyword"}}}
# Every hit judged ambiguous, so the corrective search always runs, with the question's own words.
CRAG = {
    "retrieval_evaluator": {
        "text_fields": ["text"],
        "upper": 1.0,
        "lower": -1.0,
        "corrective": {"index": "docs", "size": 5, "keywords": "question"},
    }
}
# The reader always confident: whatever the node's search finds is quoted as its reference.
CHAIN = {"chain_of_query": {"text_field": "text", "index": "docs", "r_max": 1, "skip_llm_above": 1, "theta": -1e9}}
# The LLM's own chain names nothing of tenant B's.
CHAIN_TEXT = "[Query 1]: What is the capital of Germany?\n[Answer 1]: Bonn\n[Final Content]: It is Bonn [1]."
PROCESSORS = {"corrective_index": CRAG, "chain_index": CHAIN}


@dataclass
class Tenants:
    url: str
    recorder: RecordingProxy


@pytest.fixture
def tenants(
    opensearch: OpenSearch,
    make_answerbox: AnswerboxFactory,
    osmem_url: str,
    scripted_llm: tuple[ScriptedLLM, str],
) -> Iterator[Tenants]:
    bulk_index(opensearch, "docs", [dict(d) for d in DOCS], MAPPINGS)
    actions = [
        {"add": {"index": "docs", "alias": f"tenant_{t.lower()}", "filter": {"term": {"tenant": t}}}} for t in "AB"
    ]
    opensearch.indices.update_aliases(body={"actions": actions})
    llm, llm_url = scripted_llm
    llm.replies = [CHAIN_TEXT]
    recorder = RecordingProxy(osmem_url)
    with serve(recorder.app()) as proxied:
        yield Tenants(make_answerbox(opensearch={"url": proxied}, llm={"base_url": llm_url}), recorder)


@pytest.mark.parametrize("processor", PROCESSORS.values(), ids=PROCESSORS.keys())
def test_a_pipeline_naming_the_backing_index_never_reads_another_tenant(
    tenants: Tenants, client: httpx.Client, processor: dict[str, Any]
) -> None:
    body = {"query": {"match": {"text": QUESTION}}, "search_pipeline": {"response_processors": [processor]}}
    response = client.post(f"{tenants.url}/tenant_a/_search", json=body)
    assert response.status_code == 200, response.text
    result = response.json()
    assert [hit["_id"] for hit in result["hits"]["hits"]] == ["a1"]
    assert '"b1"' not in response.text
    assert "Berlin" not in response.text
    assert "secret plan" not in response.text
    warnings = " ".join(result["ext"]["answerbox"]["warnings"])
    assert "[tenant_a] names the alias [tenant_a]" in warnings
    # The aliases were read as the caller, and nothing but the caller's own search was sent.
    assert [r.path for r in tenants.recorder.matching("/_alias")] == ["/tenant_a/_alias"]
    searches = [r.path for r in tenants.recorder.requests if r.path.endswith(("/_search", "/_msearch"))]
    assert [path for path in searches if not path.startswith("/.answerbox")] == ["/tenant_a/_search"]
