"""Structured output end to end: a chain asked for as JSON over real HTTP (answerbox →
osmem-server, the shipped ONNX reader) from the scripted LLM taking ``json_object``, as
llama-cpp-python's server does: the client's probe and ``response_format`` as sent.

The readers are tested on their own (``tests/unit/processors``), and each processor's JSON
requests with a structured fake LLM there too (the chain, the keyword rewrite, the cited answer).
"""

from __future__ import annotations

import httpx
from answerbox.processors.chain_of_query.parser import CHAIN_SCHEMA
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index
from tests.processors.test_chain_of_query import CONFIDENT, DOCS, chain_search
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
