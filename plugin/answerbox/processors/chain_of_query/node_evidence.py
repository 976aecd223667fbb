"""IR's side of a Chain-of-Query: the top-1 hit for each node's query, and the reader's span in it.

All queries of a chain go to OpenSearch in one ``_msearch`` within the caller's scope
(``ScopedSearch``), so a node can never read more than the search it came from.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from answerbox.models import ReaderSpan
from answerbox.pipeline.caller_scope.scope import ScopedSearch
from answerbox.processors.chain_of_query.parser import ChainNode
from answerbox.processors.text.instructions import addresses_the_model
from answerbox.processors.text.passages import hits_of, passages_of
from answerbox.processors.text.spans import Passage, Span
from answerbox.services import Services

__all__ = ["NodeEvidence", "gather_evidence", "reference_excerpt"]


@dataclass(frozen=True, slots=True)
class NodeEvidence:
    """The top-1 passage of a node's query and what the reader found in it."""

    passage: Passage
    span: ReaderSpan  # offsets in ``passage.text``; its confidence is SearChain's f
    # How many logits below its own span the reader rates the LLM's answer in the window it read
    # (``models.reader.answer_gap``); None: no LLM answer, or none the window holds.
    answer_gap: float | None = None

    @property
    def found(self) -> Span:
        """The reader's span, as a span of the hit."""
        return self.passage.span(self.span.start, self.span.end)

    def window(self, max_chars: int) -> Span:
        """At most ``max_chars`` of the passage, centred on the reader's span."""
        length = len(self.passage.text)
        if length <= max_chars:
            return self.passage.span(0, length)
        middle = (self.span.start + self.span.end) // 2 if self.span.text else 0
        start = max(0, min(middle - max_chars // 2, length - max_chars))
        return self.passage.span(start, start + max_chars)


def _top_passage(response: Any, field: str) -> Passage | None:
    """``field`` of the first hit, or None for an error, no hit, a hit without that text, or
    text that addresses the model (the span the reader finds there is the one it dictates)."""
    hits = hits_of(response)
    found = passages_of(hits[0], [field]) if hits else []
    return found[0] if found and not addresses_the_model(found[0].text) else None


async def gather_evidence(
    services: Services, search: ScopedSearch, *, index: str | None, field: str, nodes: Sequence[ChainNode]
) -> list[NodeEvidence | None]:
    """One entry per node, in order: its evidence, or None when nothing was found."""
    if not nodes:
        return []
    responses = await search.msearch(
        [{"match": {field: n.query}} for n in nodes], size=1, fields=[field], searched=[field], index=index
    )
    found = [_top_passage(r, field) for r in responses]
    reader = (await services.models()).reader

    async def read(node: ChainNode, passage: Passage) -> NodeEvidence:
        return NodeEvidence(passage, *await reader.read_answer(node.query, passage.text, node.answer))

    read_all = await asyncio.gather(*(read(n, p) for n, p in zip(nodes, found, strict=True) if p is not None))
    evidence = iter(read_all)
    return [next(evidence) if p is not None else None for p in found]


def reference_excerpt(evidence: NodeEvidence, max_chars: int) -> str:
    """The passage around the span, as data for a prompt: brackets become parentheses so a
    document cannot open a chain marker, and whitespace is collapsed."""
    return " ".join(evidence.window(max_chars).text.replace("[", "(").replace("]", ")").split())
