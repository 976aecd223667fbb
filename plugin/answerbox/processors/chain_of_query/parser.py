"""Reading a Chain-of-Query out of LLM text: ``[Query k]``, ``[Answer k]``, ``[Unsolved Query]``, ``[Final Content]``.

LLM output is untidy, so the parser is lenient where the paper's format is not met:
numbers may be missing or wrong, text outside markers is ignored, the final content
may be missing. Two rules carry SearChain's semantics:

- an ``[Unsolved Query]`` ends the chain (the LLM waits for IR's answer), so anything
  after it is not part of this round;
- a query the LLM gave no answer for is an unsolved query.

A ``[Question]`` after the chain began is a made-up next example: parsing stops there.

Where the LLM endpoint takes a schema, the chain is asked for as :data:`CHAIN_SCHEMA`'s JSON
(the tracing prompt's as :data:`FINAL_CONTENT_SCHEMA`'s) and read into the same
:class:`ParsedChain` by :func:`read_chain`; a reply cut off by ``max_tokens`` keeps the nodes
it finished (a node cut off inside its answer, or whose answer filled the schema's cap, is an
unsolved query), and a reply that is not that JSON is read as text.
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass

from pydantic import BaseModel

from answerbox.llm.structured import Schema, array, from_json, object_schema, string
from answerbox.processors.text.words import FINAL_ANSWER

__all__ = [
    "CHAIN_SCHEMA",
    "FINAL_CONTENT_SCHEMA",
    "ChainNode",
    "ParsedChain",
    "citation_markers",
    "final_answer",
    "parse_chain",
    "read_chain",
]

_MARKER = re.compile(
    r"\[\s*(?:(?P<kind>query|answer)\s*(?P<number>\d+)?|(?P<unsolved>unsolved\s+query)"
    r"|(?P<final>final\s+content)|(?P<question>question))\s*\]\s*:?",
    re.IGNORECASE,
)
_CITATION = re.compile(r"\[(\d+)\]")

# An empty answer is the [Unsolved Query]; an empty final content is none. The paper's
# chains have 2-4 nodes of a short query and a shorter answer: the caps only stop a small
# model that repeats itself, so that its first node closes well within a chain's max_tokens
# (SmolLM2 looped inside its first query or answer until max_tokens in most unparsable rounds).
_QUERY_CHARS, _ANSWER_CHARS, _FINAL_CHARS = 200, 150, 600
CHAIN_SCHEMA = Schema(
    "chain",
    object_schema(
        nodes=array(object_schema(query=string(_QUERY_CHARS), answer=string(_ANSWER_CHARS)), 6),
        final_content=string(_FINAL_CHARS),
    ),
)
FINAL_CONTENT_SCHEMA = Schema("final_content", object_schema(final_content=string(_FINAL_CHARS)))


@dataclass(frozen=True, slots=True)
class ChainNode:
    query: str
    answer: str | None  # None: an unsolved query, for IR to complete

    @property
    def unsolved(self) -> bool:
        return self.answer is None


@dataclass(frozen=True, slots=True)
class ParsedChain:
    nodes: tuple[ChainNode, ...]
    final_content: str | None

    @property
    def empty(self) -> bool:
        return not self.nodes and self.final_content is None


@dataclass(slots=True)
class _Draft:
    query: str
    answer: str | None = None
    unsolved: bool = False


def _first_line(segment: str) -> str:
    for line in segment.splitlines():
        if line.strip():
            return line.strip()
    return ""


def _answer(drafts: list[_Draft], number: str | None, text: str) -> None:
    """Attach an answer to its numbered query, else to the latest query still open."""
    if number is not None and 1 <= int(number) <= len(drafts) and drafts[int(number) - 1].answer is None:
        drafts[int(number) - 1].answer = text
        return
    for draft in reversed(drafts):
        if draft.answer is None and not draft.unsolved:
            draft.answer = text
            return


def _unsolved(drafts: list[_Draft], text: str) -> None:
    """Mark the open query unsolved; the unsolved line's wording is the IR-oriented one, so it wins."""
    last = drafts[-1] if drafts else None
    if last is not None and last.answer is None:
        last.unsolved = True
        last.query = text or last.query
    elif text:
        drafts.append(_Draft(text, unsolved=True))


def parse_chain(text: str) -> ParsedChain:
    drafts: list[_Draft] = []
    final: str | None = None
    markers = list(_MARKER.finditer(text))
    for position, marker in enumerate(markers):
        segment = text[marker.end() : markers[position + 1].start() if position + 1 < len(markers) else len(text)]
        if marker["question"]:
            if drafts or final is not None:
                break
            continue
        if marker["final"]:
            final = segment.strip() or None
            continue
        value = _first_line(segment)
        if marker["unsolved"]:
            _unsolved(drafts, value)
            if drafts and drafts[-1].unsolved:
                final = None  # the chain ends at the unsolved query
                break
        elif marker["kind"].lower() == "query":
            if value:
                drafts.append(_Draft(value))
        elif value:
            _answer(drafts, marker["number"], value)
    nodes = tuple(ChainNode(d.query, None if d.unsolved else d.answer) for d in drafts)
    return ParsedChain(nodes=nodes, final_content=final)


class _JSONNode(BaseModel):
    query: str = ""
    answer: str = ""


class _JSONChain(BaseModel):
    """Either schema's JSON; read leniently, as the text format is."""

    nodes: list[_JSONNode] = []
    final_content: str = ""


_STRING = r'"(?:[^"\\]|\\.)*'  # a JSON string up to its closing quote (not included)
# A node whose query and answer were written whole (the reply may end before its "}").
_JSON_NODE = re.compile(r'\{\s*"query"\s*:\s*(' + _STRING + r'")\s*,\s*"answer"\s*:\s*(' + _STRING + r'")\s*(?:\}|\Z)')
# A node cut off inside its answer (perhaps inside an escape): the query was written whole.
_CUT_ANSWER = re.compile(r'\{\s*"query"\s*:\s*(' + _STRING + r'")\s*,\s*"answer"\s*:\s*' + _STRING + r"\\?\Z")


def _cut_off_chain(text: str) -> _JSONChain | None:
    """The nodes of a JSON chain that stops short; None when not one query was finished.

    A small model that repeats itself runs into ``max_tokens``, most often inside its first
    answer. The nodes written whole are kept, and a node whose answer was cut off keeps its
    query as an unsolved one: an answer that never ended is no answer, so IR answers it.
    """
    if not text.lstrip().startswith("{"):
        return None
    nodes = []
    for query, answer in _JSON_NODE.findall(text):
        with contextlib.suppress(ValueError):
            nodes.append(_JSONNode(query=json.loads(query), answer=json.loads(answer)))
    if cut := _CUT_ANSWER.search(text):
        with contextlib.suppress(ValueError):
            nodes.append(_JSONNode(query=json.loads(cut[1])))
    return _JSONChain(nodes=nodes) if nodes else None


def _chain_from_json(text: str) -> ParsedChain | None:
    chain = from_json(_JSONChain, text) or _cut_off_chain(text)
    if chain is None:
        return None
    nodes: list[ChainNode] = []
    for node in chain.nodes:
        # An answer that filled its cap was cut off there, as by max_tokens: it never ended, so IR answers it.
        filled = len(node.answer) >= _ANSWER_CHARS
        query, answer = " ".join(node.query.split()), "" if filled else " ".join(node.answer.split())
        if not query:
            continue
        nodes.append(ChainNode(query, answer or None))
        if not answer:
            return ParsedChain(nodes=tuple(nodes), final_content=None)  # the chain ends at the unsolved query
    return ParsedChain(nodes=tuple(nodes), final_content=chain.final_content.strip() or None)


def read_chain(text: str, structured: bool) -> ParsedChain:
    """The chain in an LLM reply: JSON when ``structured`` was asked for and came back, else the text format."""
    chain = _chain_from_json(text) if structured else None
    return chain if chain is not None else parse_chain(text)


def citation_markers(content: str) -> list[int]:
    """The ``[k]`` markers of a final content, each once, in order of first use."""
    return list(dict.fromkeys(int(m[1]) for m in _CITATION.finditer(content)))


def final_answer(content: str) -> str:
    """The short answer of a final content: after its last "final answer is", else the whole text."""
    found = [m for m in FINAL_ANSWER.finditer(content) if m["answer"].strip()]
    answer = found[-1]["answer"] if found else content
    return _CITATION.sub("", answer).strip().rstrip(".").strip()
