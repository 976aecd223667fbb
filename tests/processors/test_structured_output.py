"""Structured output where a prompt expects structure: the chain, the keyword rewrite and the
cited answer come back as JSON where the endpoint takes a schema, and are read into what the
text formats give; a reply that is not that JSON is read as text.

The readers are tested on their own; one search per processor runs over real HTTP
(answerbox → osmem-server, the shipped ONNX models) against the scripted LLM taking
``json_object``, as llama-cpp-python's server does.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from answerbox.processors.chain_of_query.parser import CHAIN_SCHEMA, ChainNode, parse_chain, read_chain
from answerbox.processors.cited_answer.citations import ANSWER_SCHEMA, parse_claims, read_answer
from answerbox.processors.retrieval_evaluator.keywords import KEYWORDS_SCHEMA, parse_keywords, read_keywords
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index
from tests.processors.test_chain_of_query import CONFIDENT, DOCS, RIGHT_CHAIN, chain_search
from tests.processors.test_cited_answer import BOOKS, MAPPINGS, answer_search
from tests.processors.test_retrieval_evaluator import EVEREST_Q, NEWS, WIKI, _pipeline, _retrieval, _search_all
from tests.processors.test_retrieval_evaluator import MAPPINGS as WIKI_MAPPINGS
from tests.support.scripted_llm import ScriptedLLM

RIGHT_CHAIN_JSON = json.dumps(
    {
        "nodes": [
            {"query": "Who is the performer of Spirit If... ?", "answer": "Kevin Drew"},
            {"query": "Where was Kevin Drew born?", "answer": "Toronto, Ontario"},
            {
                "query": "Where do greyhound buses in Toronto leave from?",
                "answer": "Greyhound buses in Toronto leave from the Toronto Coach Terminal on Bay Street.",
            },
        ],
        "final_content": "Spirit If... is by Kevin Drew [1]. Kevin Drew was born in Toronto [2]. "
        "Greyhound buses in Toronto leave from Toronto Coach Terminal [3]. So the final answer is Toronto Coach Terminal.",
    }
)


def test_a_json_chain_reads_as_its_text_form_does() -> None:
    assert read_chain(RIGHT_CHAIN_JSON, structured=True) == parse_chain(RIGHT_CHAIN)


def test_an_empty_answer_is_an_unsolved_query_that_ends_the_chain() -> None:
    reply = json.dumps(
        {
            "nodes": [
                {"query": "Who is the performer?", "answer": "Kevin Drew"},
                {"query": "Where was Kevin Drew born?", "answer": " "},
                {"query": "made up", "answer": "made up"},
            ],
            "final_content": "made up [1].",
        }
    )
    chain = read_chain(reply, structured=True)
    assert chain.nodes == (ChainNode("Who is the performer?", "Kevin Drew"), ChainNode("Where was Kevin Drew born?", None))
    assert chain.final_content is None
    assert read_chain('{"final_content": "Drew was born in Toronto [1]."}', structured=True).final_content == (
        "Drew was born in Toronto [1]."
    )


@pytest.mark.parametrize("reply", [RIGHT_CHAIN, RIGHT_CHAIN_JSON[:80], '{"nodes": "not a list"}'], ids=["text", "cut-off", "wrong-shape"])
def test_a_chain_reply_that_is_not_the_json_is_read_as_text(reply: str) -> None:
    assert read_chain(reply, structured=True) == parse_chain(reply)


def test_json_keywords_keep_the_words_from_the_question() -> None:
    question = "In what city was Billy Carlson born?"
    reply = '{"keywords": ["city, Billy Carlson", "born", "Paris", "city"]}'
    assert read_keywords(reply, question, structured=True) == ["city", "Billy Carlson", "born"]
    # Cut off at max_tokens, or prose: the text format's reading.
    for reply in ('{"keywords": ["city", "Bil', "query: city, Billy Carlson, born"):
        assert read_keywords(reply, question, structured=True) == parse_keywords(reply, question)


def test_a_json_answer_is_written_back_as_cited_sentences() -> None:
    reply = json.dumps(
        {
            "sentences": [
                {"text": "Frank Herbert wrote Dune.", "blocks": [1, 2, 1]},
                {"text": "  It was published in 1965 ", "blocks": [1]},
                {"text": "Is it long?", "blocks": []},
                {"text": " . ", "blocks": [3]},
            ]
        }
    )
    text = read_answer(reply, structured=True)
    assert text == "Frank Herbert wrote Dune [1][2]. It was published in 1965 [1]. Is it long?"
    assert [(c.text, c.markers) for c in parse_claims(text)] == [
        ("Frank Herbert wrote Dune [1][2].", [1, 2]),
        ("It was published in 1965 [1].", [1]),
        ("Is it long?", []),
    ]
    assert read_answer('{"sentences": [{"text": "Frank', structured=True) == '{"sentences": [{"text": "Frank'
    assert read_answer(reply, structured=False) == reply


def test_the_schemas_are_strict_and_capped() -> None:
    """OpenAI's strict mode wants every property required and no others; a 135M model wants caps."""

    def objects(schema: dict[str, Any]) -> list[dict[str, Any]]:
        found = [schema] if schema.get("type") == "object" else []
        children = [*schema.get("properties", {}).values(), schema.get("items", {})]
        return found + [o for child in children if child for o in objects(child)]

    for schema in (CHAIN_SCHEMA, KEYWORDS_SCHEMA, ANSWER_SCHEMA):
        for obj in objects(schema.body):
            assert obj["additionalProperties"] is False and obj["required"] == list(obj["properties"])
    assert KEYWORDS_SCHEMA.body["properties"]["keywords"]["maxItems"] == 3


def test_chain_asked_for_as_json_is_verified_as_the_text_one_is(
    opensearch: OpenSearch, scripted_llm: tuple[ScriptedLLM, str], make_answerbox: AnswerboxFactory, client: httpx.Client
) -> None:
    bulk_index(opensearch, "wiki", [dict(d) for d in DOCS], {"properties": {"text": {"type": "text"}}})
    scripted, llm_url = scripted_llm
    scripted.formats, scripted.replies = ("json_object",), [RIGHT_CHAIN_JSON]
    url = make_answerbox(llm={"base_url": llm_url}, limits={"processor_timeout_s": 120, "pipeline_budget_s": 120})
    response = client.post(f"{url}/wiki/_search", json=chain_search(theta=CONFIDENT))
    chain = response.json()["ext"]["answerbox"]["chain"]
    assert chain["stopped"] == "finished" and chain["verified"] is True, chain
    assert [c["_id"] for c in chain["citations"]] == ["album", "drew", "terminal"]
    assert chain["final_answer"] == "Toronto Coach Terminal"
    (call,) = scripted.calls
    assert call["response_format"] == {"type": "json_object", "schema": CHAIN_SCHEMA.body}
    assert call["stop"] is None  # the paper's stop strings could cut a JSON string
    assert call["messages"][0]["content"].endswith(
        'Write the reasoning chain as JSON: {"nodes": [{"query": "...", "answer": "..."}], "final_content": "..."}. '
        'Each node is a [Query] with its [Answer]; a node whose "answer" is empty is an [Unsolved Query] and ends the chain. '
        '"final_content" is the [Final Content], citing node k with [k], or empty.'
    )
    assert len(scripted.probes) == 2


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
        assert "response_format" not in call and scripted.probes == [] and "JSON" not in prompt
        assert call["stop"] == ["\nquestion:"]
    else:
        assert call["response_format"] == {"type": "json_object", "schema": KEYWORDS_SCHEMA.body}
        assert prompt.endswith('Write the query as JSON: {"keywords": ["...", "..."]}, at most three keywords.\nquery:')


def test_cited_answer_asked_for_as_json_is_checked_as_cited_text(
    opensearch: OpenSearch, scripted_llm: tuple[ScriptedLLM, str], make_answerbox: AnswerboxFactory, client: httpx.Client
) -> None:
    bulk_index(opensearch, "books", [dict(d) for d in BOOKS], MAPPINGS)
    scripted, llm_url = scripted_llm
    scripted.formats = ("json_object",)
    # Blocks are numbered oldest first: [1] novel (2015), [2] author (2019), [3] film (2021).
    scripted.replies = [json.dumps({"sentences": [{"text": "Frank Herbert wrote Dune.", "blocks": [2, 3]}]})]
    url = make_answerbox(llm={"base_url": llm_url})
    response = client.post(f"{url}/books/_search", json=answer_search())
    answer = response.json()["ext"]["answerbox"]["answer"]
    assert answer["mode"] == "generative" and answer["text"] == "Frank Herbert wrote Dune [2]."
    assert [(c["marker"], c["_id"]) for c in answer["citations"]] == [(2, "author")]
    assert [(f["marker"], f["reason"]) for f in answer["flagged"]] == [(3, "unsupported")]
    (call,) = scripted.calls
    assert call["response_format"] == {"type": "json_object", "schema": ANSWER_SCHEMA.body}
    assert 'Write the answer as JSON: {"sentences": [{"text": "...", "blocks": [2]}]}' in call["messages"][1]["content"]
