"""chain_of_query (SearChain) end to end: answerbox under uvicorn → osmem-server finding each
node's passage, the shipped ONNX reader checking it, and a scripted LLM writing the chains (the
real local LLM in the ``real_llm`` test). The run's rules (feedback, tracing, the budget,
degradation) are unit tests: ``tests/unit/processors/chain_of_query``.

θ is set in the pipeline where a test needs the reader to be confident (θ far below any
logit), so the tests do not hang on the calibrated value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index, completions
from tests.support.chains import RIGHT_CHAIN
from tests.support.recording_proxy import RecordingProxy
from tests.support.scripted_llm import ScriptedLLM

DOCS = [
    {"_id": "album", "text": "Spirit If... is the debut solo album by Kevin Drew, released in 2007 by Arts & Crafts."},
    {"_id": "drew", "text": "Kevin Drew was born in Toronto, Ontario, where he founded the band Broken Social Scene."},
    {"_id": "terminal", "text": "Greyhound buses in Toronto leave from the Toronto Coach Terminal on Bay Street."},
    {"_id": "feist", "text": "Leslie Feist is a singer who grew up in Calgary and later moved to Toronto."},
]
QUESTION = "Where do greyhound buses in the birthplace of the performer of Spirit If... leave from?"
CONFIDENT = -1e9  # θ below any relevance logit: the reader is always confident

WRONG_PERFORMER = (
    "[Query 1]: Who is the performer of Spirit If... ?\n[Answer 1]: Leslie Feist\n"
    "[Query 2]: Where was Leslie Feist born?\n[Answer 2]: Calgary\n"
    "[Final Content]: Spirit If... is by Leslie Feist [1], born in Calgary [2]. So the final answer is Calgary."
)


@pytest.fixture
def wiki(opensearch: OpenSearch) -> dict[str, str]:
    bulk_index(opensearch, "wiki", [dict(d) for d in DOCS], {"properties": {"text": {"type": "text"}}})
    return {str(d["_id"]): str(d["text"]) for d in DOCS}


@dataclass
class Chains:
    """The ``wiki`` index, the scripted LLM, and answerbox in front of both (started on first search)."""

    llm: ScriptedLLM
    llm_url: str
    client: httpx.Client
    osmem_url: str
    start: AnswerboxFactory
    url: str = ""

    def answerbox(self, **overrides: Any) -> str:
        # A roomy processor timeout: a loaded CI machine must not turn the tests into budget tests.
        return self.start(
            llm={"base_url": self.llm_url}, limits={"processor_timeout_s": 120, "pipeline_budget_s": 120}, **overrides
        )

    def search(self, body: dict[str, Any]) -> dict[str, Any]:
        self.url = self.url or self.answerbox()
        return search(self.client, self.url, body)

    def assert_same_hits(self, result: dict[str, Any]) -> None:
        same_hits(result, self.osmem_url, self.client)


@pytest.fixture
def chains(
    wiki: dict[str, str],
    scripted_llm: tuple[ScriptedLLM, str],
    make_answerbox: AnswerboxFactory,
    client: httpx.Client,
    osmem_url: str,
) -> Chains:
    llm, llm_url = scripted_llm
    return Chains(llm, llm_url, client, osmem_url, make_answerbox)


def chain_search(question: str = QUESTION, **config: Any) -> dict[str, Any]:
    """A search whose pipeline is the chain, run whatever the reader's confidence (``test_answer_confidence`` tests the
    skip)."""
    config.setdefault("budget_s", 100)
    config.setdefault("skip_llm_above", 1)
    return {
        "query": {"match": {"text": question}},
        "search_pipeline": {"response_processors": [{"chain_of_query": config}]},
    }


def search(
    client: httpx.Client, url: str, body: dict[str, Any], headers: dict[str, str] | None = None, timeout: float = 60
) -> dict[str, Any]:
    response = client.post(f"{url}/wiki/_search", json=body, headers=headers, timeout=timeout)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def same_hits(result: dict[str, Any], osmem_url: str, client: httpx.Client, question: str = QUESTION) -> None:
    direct = client.post(f"{osmem_url}/wiki/_search", json={"query": {"match": {"text": question}}}).json()
    assert result["hits"] == direct["hits"]


def assert_references_exact(chain: dict[str, Any], texts: dict[str, str]) -> None:
    for node in chain["nodes"]:
        ref = node["reference"]
        if ref is not None:
            assert ref["_index"] == "wiki"
            assert ref["field"] == "text"
            assert texts[ref["_id"]][ref["start"] : ref["end"]] == node["reader_answer"]


def test_confident_reader_corrects_a_wrong_node_and_cites_the_supporting_hits(
    chains: Chains, wiki: dict[str, str]
) -> None:
    llm = chains.llm
    llm.replies = [WRONG_PERFORMER, RIGHT_CHAIN]
    result = chains.search(chain_search(theta=CONFIDENT))
    chain = result["ext"]["answerbox"]["chain"]
    assert chain["rounds"] == 2
    assert chain["stopped"] == "finished"
    assert chain["llm"]["calls"] == 2
    first = chain["nodes"][0]
    assert first["source"] == "corrected"
    assert first["llm_answer"] == "Leslie Feist"
    assert first["verified"] is True
    assert "Kevin Drew" in first["reader_answer"]
    assert first["reference"]["_id"] == "album"
    feedback = llm.calls[1]["messages"]
    assert [m["role"] for m in feedback] == ["user", "assistant", "user"]
    assert feedback[1]["content"] == WRONG_PERFORMER
    assert feedback[2]["content"].startswith(
        "According to the Reference, the answer for Who is the performer of Spirit If... ? "
        f"should be {first['reader_answer']}, "
        f"you can change your answer and continue constructing the reasoning chain for [Question]: {QUESTION}."
    )
    assert 'Reference: "Spirit If... is the debut solo album by Kevin Drew' in feedback[2]["content"]
    # Only the first failing node got feedback: "Where was Leslie Feist born?" was never checked.
    assert [n["query"] for n in chain["nodes"]] == [
        "Who is the performer of Spirit If... ?",
        "Where was Kevin Drew born?",
        "Where do greyhound buses in Toronto leave from?",
    ]
    assert [c["_id"] for c in chain["citations"]] == ["album", "drew", "terminal"]
    assert [c["marker"] for c in chain["citations"]] == [1, 2, 3]
    assert [(r["_id"], r["text"]) for r in chain["references"]] == [(i, wiki[i]) for i in ("album", "drew", "terminal")]
    assert chain["verified"] is True
    assert chain["abstained"] is False
    assert chain["final_answer"] == "Toronto Coach Terminal"
    assert_references_exact(chain, wiki)
    tree = chain["tree"]
    assert tree[0]["feedback"] == {"node": 0, "action": "correct"}
    assert tree[1]["parent"] == {"round": 1, "node": 0}
    answer = result["ext"]["answerbox"]["answer"]
    assert answer["mode"] == "chain"
    assert [c["_id"] for c in answer["citations"]] == ["album", "drew", "terminal"]
    chains.assert_same_hits(result)


@pytest.mark.real_llm
def test_real_llm_chain_keeps_hits_and_only_verified_citations(
    wiki: dict[str, str],
    make_answerbox: AnswerboxFactory,
    client: httpx.Client,
    osmem_url: str,
    real_llm: tuple[RecordingProxy, str],
) -> None:
    recorder, llm_url = real_llm
    # The small local model takes seconds per call, minutes on a busy machine: one round, then
    # at most the tracing call, with timeouts to match.
    url = make_answerbox(
        llm={"base_url": llm_url, "timeout_s": 120}, limits={"processor_timeout_s": 270, "pipeline_budget_s": 270}
    )
    question = "Where was Kevin Drew born?"
    result = search(client, url, chain_search(question, r_max=1, budget_s=250, max_tokens=96), timeout=300)
    same_hits(result, osmem_url, client, question)
    chain = result["ext"]["answerbox"]["chain"]
    assert chain["llm"]["calls"] >= 1, result["ext"]["answerbox"]
    assert chain["llm"]["prompt_tokens"] > 0, result["ext"]["answerbox"]
    assert chain["rounds"] == 1, result["ext"]["answerbox"]
    assert len(completions(recorder)) == chain["llm"]["calls"]
    assert question in completions(recorder)[0]["messages"][-1]["content"]
    assert chain["stopped"] in ("finished", "rounds")
    assert_references_exact(chain, wiki)
    for node in [n for n in chain["nodes"] if n["verified"]]:
        assert node["reader_answer"]
        assert node["confidence"] > chain["theta"]
    answer = result["ext"]["answerbox"]["answer"]
    assert answer["abstained"] is chain["abstained"]
    verified = {(c["marker"], c["_id"]) for c in chain["citations"] if c["verified"]}
    assert {(c["marker"], c["_id"]) for c in answer["citations"]} <= verified


ONE_WRONG_NODE = (
    "[Query 1]: Who is the performer of Spirit If... ?\n[Answer 1]: Leslie Feist\n"
    "[Final Content]: Spirit If... is by Leslie Feist [1]. So the final answer is Leslie Feist."
)


def test_a_final_content_that_ignores_the_readers_correction_is_never_reported_verified(chains: Chains) -> None:
    # One round: the node is corrected, and the LLM's tracing reply states its own answer again.
    chains.llm.replies = [ONE_WRONG_NODE, ONE_WRONG_NODE.split("\n", 2)[2]]
    result = chains.search(chain_search("Who is the performer of Spirit If... ?", theta=CONFIDENT, r_max=1))
    chain = result["ext"]["answerbox"]["chain"]
    (node,) = chain["nodes"]
    assert (node["action"], node["verified"], node["llm_answer"]) == ("correct", True, "Leslie Feist")
    assert "Kevin Drew" in node["answer"]
    assert (chain["verified"], chain["abstained"], chain["final_answer"]) == (False, True, None)
    assert "Leslie Feist" in chain["unverified_content"]
    answer = result["ext"]["answerbox"]["answer"]
    assert (answer["abstained"], answer["citations"]) == (True, [])
    assert any("states what IR corrected" in w for w in result["ext"]["answerbox"]["warnings"])
    same_hits(result, chains.osmem_url, chains.client, "Who is the performer of Spirit If... ?")


@pytest.mark.parametrize(("margin", "action", "kept"), [(0, "correct", None), (1e6, "pass", "2007")])
def test_an_llm_answer_the_reader_rates_within_the_margin_is_kept(
    chains: Chains, margin: float, action: str, kept: str | None
) -> None:
    # "2007" is in the passage the node reads, but it is not who performed the album: only a
    # margin wider than any gap keeps it (the shipped margin is chosen by bench.chain_nodes).
    question = "Who is the performer of Spirit If... ?"
    chains.llm.replies = [f"[Query 1]: {question}\n[Answer 1]: 2007\n[Final Content]: It is 2007 [1]."]
    result = chains.search(chain_search(question, theta=CONFIDENT, r_max=1, answer_margin=margin))
    (node,) = result["ext"]["answerbox"]["chain"]["nodes"]
    assert (node["action"], node["verified"]) == (action, True)
    assert node["answer"] == (kept or node["reader_answer"])
    assert node["reference"]["_id"] == "album"
