"""The claim verifier's side of a chain: does a node's reference entail its answers, and do the
verified nodes' references entail the final content?

A node's answer is read as the claim "the answer to <query> is <answer>" (``answer_claim``)
against its reference, at most ``REFERENCE_CHARS`` of its hit around the reader's span (a
claim's cost grows with the windows read). The final content is a claim like any other: each
of its sentences must be entailed by one verified node's reference, so a correction the LLM
ignored in its final content is caught.
"""

from __future__ import annotations

from collections.abc import Sequence

from answerbox.models import Models
from answerbox.processors.chain_of_query.node_evidence import NodeEvidence
from answerbox.processors.chain_of_query.parser import ChainNode
from answerbox.processors.chain_of_query.verify import NodeRecord, NodeSupport
from answerbox.processors.text.claims import answer_claim, entailments, parse_claims

__all__ = ["REFERENCE_CHARS", "content_entailed", "node_supports"]

REFERENCE_CHARS = 800


async def node_supports(
    models: Models, nodes: Sequence[ChainNode], evidence: Sequence[NodeEvidence | None]
) -> list[NodeSupport | None]:
    """One per node: None without a verifier (the reader's rule decides alone)."""
    verifier = models.verifier
    if verifier is None:
        return [None] * len(nodes)
    asked: list[tuple[int, str, str, str]] = []  # (node, which answer, reference, claim)
    for i, (node, found) in enumerate(zip(nodes, evidence, strict=True)):
        if found is None:
            continue
        reference = found.window(REFERENCE_CHARS).text
        if node.answer:
            asked.append((i, "llm", reference, answer_claim(node.query, node.answer)))
        if found.span.text:
            asked.append((i, "reader", reference, answer_claim(node.query, found.span.text)))
    judged = await entailments(verifier, [(reference, claim) for _, _, reference, claim in asked])
    threshold = verifier.thresholds.entailed_above
    said: dict[tuple[int, str], bool] = {
        (i, which): e.entailed >= threshold for (i, which, _, _), e in zip(asked, judged, strict=True)
    }
    return [
        NodeSupport(llm=said.get((i, "llm")), reader=said.get((i, "reader"))) if found is not None else None
        for i, found in enumerate(evidence)
    ]


async def content_entailed(models: Models, content: str, path: Sequence[NodeRecord]) -> bool | None:
    """Whether every sentence of ``content`` is entailed by a verified node's reference; None
    without a verifier."""
    verifier = models.verifier
    if verifier is None:
        return None
    references = [r.evidence.window(REFERENCE_CHARS).text for r in path if r.verified and r.evidence is not None]
    claims = [c.plain for c in parse_claims(content) if c.plain]
    if not references or not claims:
        return False
    judged = await entailments(verifier, [(ref, claim) for claim in claims for ref in references])
    threshold = verifier.thresholds.entailed_above
    return all(
        any(e.entailed >= threshold for e in judged[k * len(references) : (k + 1) * len(references)])
        for k in range(len(claims))
    )
