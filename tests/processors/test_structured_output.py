"""Structured output where a prompt expects structure: the chain, the keyword rewrite and the
cited answer come back as JSON where the endpoint takes a schema, and are read into what the
text formats give; a reply that is not that JSON is read as text.

The readers are tested on their own (tests/unit/processors); one search per processor runs over real HTTP
(answerbox → osmem-server, the shipped ONNX models) against the scripted LLM taking
``json_object``, as llama-cpp-python's server does.
"""

from __future__ import annotations

import json

import httpx
import pytest
from answerbox.processors.chain_of_query.parser import CHAIN_SCHEMA
from answerbox.processors.cited_answer.citations import ANSWER_SCHEMA
from answerbox.processors.retrieval_evaluator.keywords import KEYWORDS_SCHEMA
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index
from tests.processors.test_chain_of_query import CONFIDENT, DOCS, chain_search
from tests.processors.test_cited_answer import BOOKS, MAPPINGS, answer_search
from tests.processors.test_retrieval_evaluator import EVEREST_Q, NEWS, WIKI, _pipeline, _retrieval, _search_all
from tests.processors.test_retrieval_evaluator import MAPPINGS as WIKI_MAPPINGS
from tests.support.chains import RIGHT_CHAIN_JSON
from tests.support.scripted_llm import ScriptedLLM


def test_chain_asked_for_as_json_is_verified_as_the_text_one_is(
    opensearch: OpenSearch,
    scripted_llm: tuple[ScriptedLLM, str],
    make_answerbox: AnswerboxFactory,
    client: httpx.Client,
) -> None:
    bulk_index(opensearch, "wiki", [dict(d) for d in DOCS], {"properties": {"text": {"type": "text"}}})
    scripted, llm_url = scripted_llm
    scripted.formats, scripted.replies = ("json_object",), [RIGHT_CHAIN_JSON]
    url = make_answerbox(llm={"base_url": llm_url}, limits={"processor_timeout_s": 120, "pipeline_budget_s": 120})
    response = client.post(f"{url}/wiki/_search", json=chain_search(theta=CONFIDENT))
    chain = response.json()["ext"]["answerbox"]["chain"]
    assert chain["stopped"] == "finished", chain
    assert chain["verified"] is True, chain
    assert [c["_id"] for c in chain["citations"]] == ["album", "drew", "terminal"]
    assert chain["final_answer"] == "Toronto Coach Terminal"
    (call,) = scripted.calls
    assert call["response_format"] == {"type": "json_object", "schema": CHAIN_SCHEMA.body}
    assert call["stop"] is None  # the paper's stop strings could cut a JSON string
    prompt = call["messages"][0]["content"]
    # The form comes from the schema: no JSON example a small model could copy.
    assert prompt.endswith(
        "Write the reasoning chain for this [Question] as JSON: each node a [Query] with its [Answer], where an empty"
        ' "answer" is an [Unsolved Query] and ends the chain, then the [Final Content] (empty if none).'
    )
    assert '{"nodes"' not in prompt
    assert len(scripted.probes) == 2


def test_a_chain_cut_off_inside_its_answer_is_an_unsolved_query_for_ir(
    opensearch: OpenSearch,
    scripted_llm: tuple[ScriptedLLM, str],
    make_answerbox: AnswerboxFactory,
    client: httpx.Client,
) -> None:
    # What SmolLM2 does with a schema: the query is written, the answer repeats itself until max_tokens.
    bulk_index(opensearch, "wiki", [dict(d) for d in DOCS], {"properties": {"text": {"type": "text"}}})
    scripted, llm_url = scripted_llm
    query = "Where do greyhound buses in Toronto leave from?"
    looping = json.dumps({"nodes": [{"query": query, "answer": "The answer is: " * 60}], "final_content": ""})
    scripted.formats, scripted.replies, scripted.cut_at_max_tokens = ("json_object",), [looping], True
    url = make_answerbox(llm={"base_url": llm_url}, limits={"processor_timeout_s": 120, "pipeline_budget_s": 120})
    response = client.post(f"{url}/wiki/_search", json=chain_search(theta=CONFIDENT, r_max=1, max_tokens=40))
    chain = response.json()["ext"]["answerbox"]["chain"]
    [branch] = chain["tree"]
    assert branch["cut_off"] is True, branch
    assert branch["malformed"] is False, branch
    assert branch["nodes"] == [{"query": query, "answer": None, "unsolved": True}]
    [node] = chain["nodes"]
    assert (node["query"], node["source"], node["reference"]["_id"]) == (query, "completed", "terminal")
    assert not any("wrote no [Query]" in w for w in response.json()["ext"]["answerbox"]["warnings"])


@pytest.mark.parametrize(
    ("formats", "structured_output", "reply"),
    [
        (("json_object",), "auto", '{"keywords": ["Mount Everest", "first recorded ascent"]}'),
        (("json_object",), "none", "Mount Everest, first recorded ascent"),
        (("json_object",), "auto", "Mount Everest, first recorded ascent"),  # not JSON: read as text
    ],
    ids=["json", "none", "not-json"],
)
def test_keyword_rewrite_reads_json_or_text_into_the_same_query(
    opensearch: OpenSearch,
    scripted_llm: tuple[ScriptedLLM, str],
    make_answerbox: AnswerboxFactory,
    client: httpx.Client,
    formats: tuple[str, ...],
    structured_output: str,
    reply: str,
) -> None:
    bulk_index(opensearch, "wiki", [dict(d) for d in WIKI], WIKI_MAPPINGS)
    bulk_index(opensearch, "news", [dict(d) for d in NEWS], WIKI_MAPPINGS)
    scripted, llm_url = scripted_llm
    scripted.formats, scripted.replies = formats, [reply]
    url = make_answerbox(llm={"base_url": llm_url, "structured_output": structured_output})
    retrieval = _retrieval(_search_all(client, url, "news", EVEREST_Q, _pipeline(corrective={"index": "wiki"})))
    assert retrieval["corrective_query"] == "Mount Everest first recorded ascent"
    assert retrieval["corrective"]["keywords_source"] == "llm"
    (call,) = scripted.calls
    prompt = call["messages"][0]["content"]
    if structured_output == "none":
        assert "response_format" not in call
        assert scripted.probes == []
        assert "JSON" not in prompt
        assert call["stop"] == ["\nquestion:"]
    else:
        assert call["response_format"] == {"type": "json_object", "schema": KEYWORDS_SCHEMA.body}
        assert (
            'question: In what city was Billy Carlson born?\nquery: {"keywords": ["city", "Billy Carlson", "born"]}\n'
            in prompt
        )


def test_cited_answer_asked_for_as_json_is_checked_as_cited_text(
    opensearch: OpenSearch,
    scripted_llm: tuple[ScriptedLLM, str],
    make_answerbox: AnswerboxFactory,
    client: httpx.Client,
) -> None:
    bulk_index(opensearch, "books", [dict(d) for d in BOOKS], MAPPINGS)
    scripted, llm_url = scripted_llm
    scripted.formats = ("json_object",)
    # Blocks are numbered oldest first: [1] novel (2015), [2] author (2019), [3] film (2021).
    scripted.replies = [json.dumps({"sentences": [{"text": "Frank Herbert wrote Dune.", "blocks": [2, 3]}]})]
    url = make_answerbox(llm={"base_url": llm_url})
    response = client.post(f"{url}/books/_search", json=answer_search())
    answer = response.json()["ext"]["answerbox"]["answer"]
    assert answer["mode"] == "generative"
    assert answer["text"] == "Frank Herbert wrote Dune [2]."
    assert [(c["marker"], c["_id"]) for c in answer["citations"]] == [(2, "author")]
    assert [(f["marker"], f["reason"]) for f in answer["flagged"]] == [(3, "unsupported")]
    (call,) = scripted.calls
    assert call["response_format"] == {"type": "json_object", "schema": ANSWER_SCHEMA.body}
    prompt = call["messages"][1]["content"]
    assert (
        '{"text": "The Eiffel Tower opened on 31 March 1889.", "blocks": [2]}' in prompt
    )  # the demonstration's answer
    assert prompt.endswith(
        "Write the answer as JSON: one entry per sentence, with the numbers of the evidence it comes from in "
        '"blocks".\nanswer:'
    )
