"""Over real HTTP: an _msearch's lines that run a pipeline are each one run for admission.
A 100-line _msearch once counted as ``max_concurrent_runs`` runs (16) and ran all 100 at once;
now as many lines as there is room for run, and each line past it is refused with OpenSearch's
per-line 429, while the lines OpenSearch runs alone are answered as ever."""

from __future__ import annotations

import json
from typing import Any

import httpx
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index
from tests.support.scripted_llm import ScriptedLLM

EXPAND = {"request_processors": [{"llm_query_expansion": {"timeout_s": 10}}]}
NDJSON = {"content-type": "application/x-ndjson"}


def _ndjson(lines: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(line) + "\n" for line in lines)


def test_each_pipeline_line_is_a_run_and_those_past_the_limit_are_refused_one_by_one(
    make_answerbox: AnswerboxFactory,
    opensearch: OpenSearch,
    scripted_llm: tuple[ScriptedLLM, str],
    client: httpx.Client,
) -> None:
    bulk_index(opensearch, "books", [{"_id": "dune", "body": "Spice is mined on Arrakis."}])
    llm, llm_url = scripted_llm
    llm.replies = ["spice melange arrakis"]
    url = make_answerbox(
        llm={"base_url": llm_url, "max_concurrent": 8, "max_concurrent_per_caller": 8},
        limits={"max_concurrent_runs": 2},
    )
    words = ["spice", "sand", "water", "worm", "house"]
    piped = [x for w in words for x in ({}, {"query": {"match": {"body": w}}, "search_pipeline": EXPAND})]
    plain = [{}, {"query": {"match": {"body": "spice"}}}]
    response = client.post(f"{url}/books/_msearch", content=_ndjson([*piped, *plain]), headers=NDJSON)
    assert response.status_code == 200, response.text
    answers = response.json()["responses"]
    assert len(answers) == 6
    ran, refused = answers[:2], answers[2:5]
    for answer in ran:
        assert answer["ext"]["answerbox"]["query_expansion"]["expansion"] == "spice melange arrakis"
    for answer in refused:
        assert answer["status"] == 429
        assert answer["error"]["type"] == "rejected_execution_exception"
        assert "limits.max_concurrent_runs" in answer["error"]["reason"]
    assert [h["_id"] for h in answers[5]["hits"]["hits"]] == ["dune"]
    assert len(llm.calls) == 2  # the refused lines asked the LLM nothing
    # The runs were given back: the next _msearch runs its lines as the first did.
    again = client.post(f"{url}/books/_msearch", content=_ndjson(piped[:4]), headers=NDJSON).json()["responses"]
    assert all("query_expansion" in answer["ext"]["answerbox"] for answer in again)
