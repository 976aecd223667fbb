"""The retrieval evaluator (CRAG): one calibrated score in [-1, 1] per passage."""

from __future__ import annotations

import math
from collections.abc import Sequence

from answerbox.models.encoder import PassageEncoder
from answerbox.models.manifest import ModelManifest

__all__ = ["Evaluator", "calibrated_score"]


def calibrated_score(relevance_logit: float, manifest: ModelManifest) -> float:
    """``tanh(scale * logit + offset)``: CRAG's range, comparable with ``crag_upper``/``crag_lower``."""
    return math.tanh(manifest.score_scale * relevance_logit + manifest.score_offset)


class Evaluator:
    def __init__(self, encoder: PassageEncoder, manifest: ModelManifest) -> None:
        self._encoder = encoder
        self._manifest = manifest

    async def score(self, question: str, passages: Sequence[str]) -> list[float]:
        """One score per passage, in order; a long passage scores as its best window."""
        if not passages:
            return []
        per_passage = await self._encoder.encode(question, passages)
        return [calibrated_score(max(o.relevance for o in outputs), self._manifest) for outputs in per_passage]
