"""The response contract: which evidence the answer is written from, and the rendered shape."""

from __future__ import annotations

from answerbox.core.contract import (
    Answer,
    AnswerboxReport,
    ChainReport,
    Citation,
    KnowledgeStrip,
    LLMUsageReport,
    PassagePiece,
    RetrievalReport,
)


def _chain(references: list[PassagePiece]) -> ChainReport:
    return ChainReport(
        question="Where was Kevin Drew born?",
        rounds=1,
        stopped="finished" if references else "rounds",
        theta=0.0,
        nodes=[],
        path=[],
        final_content=None,
        final_answer=None,
        unverified_content=None,
        citations=[],
        references=references,
        verified=bool(references),
        abstained=not references,
        tree=[],
        llm=LLMUsageReport(calls=1, prompt_tokens=10, completion_tokens=5, millis=1.0),
    )


def _strip(doc_id: str, score: float) -> KnowledgeStrip:
    return KnowledgeStrip(index="wiki", id=doc_id, field="text", start=0, end=4, text=f"text of {doc_id}", score=score)


def _retrieval(knowledge: list[KnowledgeStrip], verdict: str = "correct") -> RetrievalReport:
    return RetrievalReport.model_validate(
        {
            "verdict": verdict,
            "upper": 0.5,
            "lower": -0.5,
            "scores": [],
            "action": "refine",
            "knowledge": knowledge,
            "corrective_query": None,
            "corrective": None,
            "reranked": False,
            "dropped": 0,
        }
    )


REFERENCE = PassagePiece(index="wiki", id="drew", field="text", start=0, end=10, text="Kevin Drew")


def test_the_chains_references_come_first() -> None:
    report = AnswerboxReport(chain=_chain([REFERENCE]), retrieval=_retrieval([_strip("a", 0.9)]))
    assert report.kept_passages() == [REFERENCE]


def test_a_chain_without_references_hands_over_to_the_strips_best_first() -> None:
    report = AnswerboxReport(
        chain=_chain([]), retrieval=_retrieval([_strip("low", 0.1), _strip("high", 0.8), _strip("mid", 0.5)])
    )
    kept = report.kept_passages()
    assert kept is not None
    assert [p.id for p in kept] == ["high", "mid", "low"]


def test_an_incorrect_verdict_keeps_no_evidence_rather_than_the_hits() -> None:
    assert AnswerboxReport(retrieval=_retrieval([], verdict="incorrect")).kept_passages() == []


def test_nothing_kept_means_the_answer_comes_from_the_hits() -> None:
    assert AnswerboxReport().kept_passages() is None
    assert AnswerboxReport(chain=_chain([])).kept_passages() is None


def test_render_uses_opensearchs_underscore_names_and_flattens_the_citations() -> None:
    citation = Citation(marker=1, index="wiki", id="drew", field="text", start=0, end=10, quote="Kevin Drew")
    report = AnswerboxReport(
        answer=Answer(text="Kevin Drew [1].", citations=[citation], mode="generative"),
        retrieval=_retrieval([_strip("a", 0.9)]),
    )
    report.warn("the LLM was slow")
    body = report.render()
    assert body["citations"] == [
        {
            "marker": 1,
            "_index": "wiki",
            "_id": "drew",
            "field": "text",
            "start": 0,
            "end": 10,
            "quote": "Kevin Drew",
            "support": None,
        }
    ]
    assert body["answer"]["citations"] == body["citations"]
    assert body["retrieval"]["knowledge"][0]["_index"] == "wiki"
    assert body["retrieval"]["knowledge"][0]["_id"] == "a"
    assert "index" not in body["retrieval"]["knowledge"][0]
    assert "id" not in body["citations"][0]
    assert body["warnings"] == ["the LLM was slow"]


def test_render_without_an_answer_has_no_citations() -> None:
    body = AnswerboxReport().render()
    assert body["answer"] is None
    assert body["citations"] == []
