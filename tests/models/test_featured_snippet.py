"""The featured snippet reads the passage the evaluator scores highest, wherever the search ranked it."""

from __future__ import annotations

from answerbox.models import Models
from answerbox.processors.answering.evidence import Evidence, EvidenceFields, evidence_from_hits
from answerbox.processors.answering.extractive import featured_snippet

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
    found = await featured_snippet(QUESTION, evidence, reader_models)
    assert found is not None
    assert found.answer.mode == "extractive"
    answer, signals = found.answer, found.signals
    (citation,) = answer.citations
    # The search ranked the answering passage last; the choice is the evaluator's.
    assert citation.id == evidence[best].id == "result"
    assert citation.support == round(scores[best], 4)
    assert answer.text in citation.quote
    assert "Broncos" in answer.text
    # What its confidence rests on: the chosen passage's score and place, its lead over the next.
    assert (signals.score, signals.rank) == (scores[best], best)  # the search's order: the hits' here
    assert signals.margin == scores[best] - max(s for i, s in enumerate(scores) if i != best)
    assert 0 < signals.span_probability <= signals.covered_probability <= 1  # the best span is inside the shown one
    assert signals.over_no_answer > 0  # the reader would rather answer than say "not here"
    # Its sentence says "won Super Bowl 50" of the question's "team won Super Bowl 50".
    assert signals.question_overlap == 4 / 5
    assert signals.words == len(answer.text.split())


async def test_agreement_counts_the_other_passages_that_say_the_same(reader_models: Models) -> None:
    twice = {**TEXTS, "again": "Super Bowl 50 was won by the Denver Broncos, who beat the Carolina Panthers."}
    hits = [{"_index": "nfl", "_id": doc_id, "_source": {"text": text}} for doc_id, text in twice.items()]
    found = await featured_snippet(
        QUESTION, evidence_from_hits(hits, EvidenceFields(title=None), snippet_chars=1000), reader_models
    )
    alone = await featured_snippet(QUESTION, _evidence(), reader_models)
    assert found is not None
    assert alone is not None
    assert found.signals.agreement > alone.signals.agreement


async def test_no_snippet_without_passages_to_read(reader_models: Models) -> None:
    assert await featured_snippet(QUESTION, [], reader_models) is None
