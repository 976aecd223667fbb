"""Finding the user's query text inside a search body.

Only scoring clauses count: ``match``, ``multi_match`` and ``simple_query_string`` under
``query``, never inside a ``filter`` or ``must_not`` (those restrict what a caller sees and
must stay exactly as written).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

__all__ = ["TextClause", "find_text_clauses", "question_clauses", "question_of", "replace_text_clauses"]

_NON_SCORING = frozenset({"filter", "must_not"})


@dataclass(frozen=True)
class TextClause:
    """A query text in place: ``holder[key]`` is the string."""

    kind: str
    field: str | None
    holder: dict[str, Any]
    key: str
    # The query object holding the clause (``{"match": {...}}``), so it can be replaced whole.
    node: dict[str, Any] = dataclass_field(default_factory=dict, compare=False, repr=False)

    @property
    def text(self) -> str:
        return str(self.holder[self.key])


def _walk(node: Any) -> Iterator[TextClause]:
    if isinstance(node, list):
        for item in node:
            yield from _walk(item)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key == "match" and isinstance(value, dict):
            for field, spec in value.items():
                if isinstance(spec, dict) and isinstance(spec.get("query"), str):
                    yield TextClause("match", field, spec, "query", node)
                elif isinstance(spec, str):
                    yield TextClause("match", field, value, field, node)
        elif (
            key in ("multi_match", "simple_query_string")
            and isinstance(value, dict)
            and isinstance(value.get("query"), str)
        ):
            yield TextClause(key, None, value, "query", node)
        elif key not in _NON_SCORING:
            yield from _walk(value)


def find_text_clauses(body: Mapping[str, Any]) -> list[TextClause]:
    """The scoring text clauses of ``body["query"]``, in document order."""
    return list(_walk(body.get("query")))


def question_clauses(body: Mapping[str, Any], question: str) -> list[TextClause]:
    """The scoring text clauses of ``body["query"]`` whose text is ``question`` (spacing aside).

    Only these are a processor's to rewrite: any other text (an ``org``, a tenant) may be what
    keeps other documents out.
    """
    words = question.split()
    return [clause for clause in find_text_clauses(body) if clause.text.split() == words]


def replace_text_clauses(
    body: dict[str, Any], question: str, replacement: Callable[[TextClause], dict[str, Any]]
) -> int:
    """Swap, in place, each scoring text clause of ``body["query"]`` asking ``question`` for
    ``replacement(clause)``.

    Filters stay untouched because ``find_text_clauses`` never looks inside them, and so does
    other text (``question_clauses``). Returns how many clauses were replaced.
    """
    clauses = question_clauses(body, question)
    for clause in clauses:
        new = replacement(clause)
        clause.node.clear()
        clause.node.update(new)
    return len(clauses)


def question_of(body: Mapping[str, Any], params: Mapping[str, str]) -> str | None:
    """The user's question: ``ext.generative_qa_parameters.llm_question``, else the first query text, else ``q``."""
    ext = body.get("ext")
    if isinstance(ext, dict):
        qa = ext.get("generative_qa_parameters")
        if isinstance(qa, dict) and isinstance(qa.get("llm_question"), str) and qa["llm_question"].strip():
            return str(qa["llm_question"])
    clauses = find_text_clauses(body)
    if clauses:
        return clauses[0].text
    return params.get("q")
