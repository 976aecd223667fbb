"""The featured snippet reads the passage the evaluator scores highest, wherever the search ranked it."""

from __future__ import annotations

from answerbox.models import Models
from answerbox.processors.cited_answer.evidence import Evidence, EvidenceFields, evidence_from_hits
from answerbox.processors.cited_answer.extractive import featured_snippet

QUESTION = "Which team won Super Bowl 50?"
TEXTS = {
    "tickets": "Tickets for Super Bowl 50 sold out weeks before the game at Levi's Stadium in Santa Clara.",
    "halftime": "The Super Bowl 50 halftime show was headlined by Coldplay, with Beyoncé and Bruno Mars.",
    "result": "The Denver Broncos won Super Bowl 50, defeating the Carolina Panthers 24 to 10.",
}


def _evidence() -> list[Evidence]:
    hits = [{"_index": "nfl", "_id": doc_id, "_source": {"text": text}} for doc_id, text in TEXTS.items()]
    return evidence_from_hits(hits, EvidenceFields(title=None), snippet_chars=1000)


async def test_the_snippet_comes_from_the_best_scored_passage(reader_models: Models) -> None:
    evidence = _evidence()
    scores = await reader_models.evaluator.score(QUESTION, [e.snippet for e in evidence])
    best = max(range(len(evidence)), key=lambda i: scores[i])
    answer = await featured_snippet(QUESTION, evidence, reader_models, min_support=-1.0)
    assert answer is not None and answer.mode == "extractive"
    (citation,) = answer.citations
    # The search ranked the answering passage last; the choice is the evaluator's.
    assert citation.id == evidence[best].id == "result"
    assert citation.support == round(scores[best], 4)
    assert answer.text in citation.quote and "Broncos" in answer.text


async def test_no_snippet_when_the_best_passage_scores_below_the_gate(reader_models: Models) -> None:
    evidence = _evidence()
    best = max(await reader_models.evaluator.score(QUESTION, [e.snippet for e in evidence]))
    assert await featured_snippet(QUESTION, evidence, reader_models, min_support=best + 0.001) is None
    assert await featured_snippet(QUESTION, evidence, reader_models, min_support=best - 0.001) is not None
