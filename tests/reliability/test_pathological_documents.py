"""One hostile document in the index must not break pipeline searches, with the real models
over real HTTP. Its text handling and windows are told in the unit layer
(tests/unit/reliability/test_pathological_documents.py)."""

from __future__ import annotations

import httpx
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index

DOTS = "Spice is mined on Arrakis" + "." * 60_000
PIPELINE = {
    "response_processors": [
        {"retrieval_evaluator": {"text_fields": ["body"], "corrective": None}},
        {"cited_answer": {"size": 3}},
    ]
}


def test_a_dots_document_does_not_break_pipeline_searches(
    make_answerbox: AnswerboxFactory, opensearch: OpenSearch, client: httpx.Client
) -> None:
    bulk_index(
        opensearch,
        "docs",
        [{"_id": "dots", "body": DOTS}, {"_id": "dune", "body": "Spice is mined on the desert planet Arrakis."}],
    )
    url = make_answerbox(limits={"processor_timeout_s": 20, "pipeline_budget_s": 20})
    for question in ("Where is spice mined?", "What is mined on Arrakis?"):
        body = {
            "query": {"match": {"body": question}},
            "search_pipeline": PIPELINE,
            "ext": {"generative_qa_parameters": {"llm_question": question}},
        }
        response = client.post(f"{url}/docs/_search", json=body)
        assert response.status_code == 200, response.text
        report = response.json()["ext"]["answerbox"]
        assert {h["_id"] for h in response.json()["hits"]["hits"]} == {"dots", "dune"}
        assert not [w for w in report["warnings"] if "timed out" in w or "took longer" in w], report["warnings"]
        assert report["retrieval"]["verdict"] in ("correct", "ambiguous", "incorrect")
