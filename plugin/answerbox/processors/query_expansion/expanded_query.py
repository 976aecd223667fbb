"""The BM25 query of Jagerman et al.: the user's query weighted ``weight`` times, plus the LLM's expansion.

Two shapes, chosen in config and compared in ``bench/retrieval_eval.py``:

* ``repeat``: the paper's literal ``q q q q q expansion`` scores, as the text of the user's own
  clause;
* ``bool``: the user's clause untouched but boosted ``weight``×, with an optional ``match`` on
  the expansion (Lucene scores a repeated term as one clause per occurrence, so the two add up
  the same; ``bool`` also keeps the user's ``operator`` and ``minimum_should_match`` meaning
  what they meant).

Either way the user's clause stays required: the expansion reorders its hits and never adds
one. An expansion sharing a single word ("of") with a document the clause kept out (another
tenant's) must not bring it in.

The expansion only ever goes into ``match`` / ``multi_match`` text, which OpenSearch analyses
as plain words: LLM output never reaches a query-string parser.
"""

from __future__ import annotations

from typing import Literal

from answerbox.core.query_text import TextClause
from answerbox.opensearch import JSON
from answerbox.processors.text.words import FINAL_ANSWER

__all__ = ["Combine", "clean_expansion", "expanded_clause"]

Combine = Literal["bool", "repeat"]

# Options under which "q q q q q expansion" would change which documents match.
_PHRASE_TYPES = frozenset({"phrase", "phrase_prefix", "bool_prefix"})


def clean_expansion(text: str, max_terms: int) -> str:
    """The model's output as one line of at most ``max_terms`` words, final-answer sentences removed.

    The cap keeps the query under ``indices.query.bool.max_clause_count`` and bounds its cost.
    """
    # The paper drops a chain of thought's final-answer sentence: its words are in the
    # rationale already when they are any good.
    return " ".join(FINAL_ANSWER.sub("", text).split()[:max_terms])


def _spec(clause: TextClause) -> JSON:
    """The clause's options as a fresh dict, whatever its short or long form."""
    if clause.kind == "match" and clause.key == clause.field:
        return {"query": clause.text}
    return dict(clause.holder)


def _as_clause(clause: TextClause, spec: JSON) -> JSON:
    return {clause.kind: {clause.field: spec} if clause.kind == "match" else spec}


def _repeat_keeps_meaning(clause: TextClause, spec: JSON) -> bool:
    return (
        clause.kind != "simple_query_string"  # its text is query syntax: LLM text must not join it
        and str(spec.get("operator", "or")).lower() == "or"
        and "minimum_should_match" not in spec
        and spec.get("type") not in _PHRASE_TYPES
    )


def _expansion_clause(clause: TextClause, spec: JSON, expansion: str, boost: float) -> JSON:
    if clause.kind == "match":
        options = {k: spec[k] for k in ("analyzer",) if k in spec}
        return {"match": {clause.field: {"query": expansion, "boost": boost, **options}}}
    fields = {"fields": spec["fields"]} if "fields" in spec else {}
    return {"multi_match": {"query": expansion, "boost": boost, **fields}}


def expanded_clause(clause: TextClause, expansion: str, *, weight: int, combine: Combine) -> JSON:
    """The query object that replaces ``clause``; filters elsewhere in the query are not touched."""
    spec = _spec(clause)
    if combine == "repeat" and _repeat_keeps_meaning(clause, spec):
        repeated = _as_clause(clause, {**spec, "query": " ".join([clause.text] * weight + [expansion])})
        return {"bool": {"must": [repeated], "filter": [_as_clause(clause, spec)]}}
    boost = float(spec.get("boost", 1.0))
    original = _as_clause(clause, {**spec, "boost": boost * weight})
    return {"bool": {"must": [original], "should": [_expansion_clause(clause, spec, expansion, boost)]}}
