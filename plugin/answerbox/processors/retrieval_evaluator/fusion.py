"""Score fusion for ``rerank``: the evaluator's score plus a weighted, scale-free share of the engine's.

    fused = evaluator_score + weight · engine_score / max(engine_scores of the scored hits)

The engine's term is each hit's score over the best scored hit's, in [0, 1]: dividing by the
best score removes the engine's scale (osmem-server's BM25 is not Lucene's, and a cluster
may use any similarity), while the gaps between hits, which a rank would lose, stay. The
evaluator's score is the calibrated ``2P − 1`` in [-1, 1]; the weight is chosen offline
(``python -m onnx_models.calibrate.fusion``) and kept in the model manifest as ``rerank_fusion_weight``.
Weight 0 is the evaluator alone. The same functions serve the processor, the weight chooser
and ``bench/rerank_eval.py``, so what is measured is what is served.

The hits a rerank did not read (past ``top_n``, or left by a first pass that stopped) stay after
the read ones; :func:`scores_below` gives them scores under the lowest fused one, so that a
response's ``_score`` still descends and ``max_score`` is its first hit's (OpenSearch's contract).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["engine_term", "fuse", "scores_below"]


def _engine_value(score: object) -> float | None:
    """The engine's score as a float where it is numeric, finite and not negative (a bool is an int, not a score)."""
    if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score) or score < 0:
        return None
    return float(score)


def engine_term(engine_scores: Sequence[object]) -> list[float] | None:
    """Each score over the largest, or None when they cannot be compared on one scale: a hit
    without a numeric ``_score`` (a search sorted by a field), a negative or non-finite score,
    or no positive score at all."""
    values: list[float] = []
    for score in engine_scores:
        value = _engine_value(score)
        if value is None:
            return None
        values.append(value)
    best = max(values, default=0.0)
    if best <= 0:
        return None
    return [value / best for value in values]


def fuse(evaluator_scores: Sequence[float], engine_scores: Sequence[object], weight: float) -> list[float] | None:
    """The fused score of each hit; the evaluator's scores unchanged when ``weight`` is 0, and
    None when the engine's scores cannot be used (see :func:`engine_term`)."""
    if weight == 0:
        return list(evaluator_scores)
    term = engine_term(engine_scores)
    if term is None:
        return None
    return [score + weight * share for score, share in zip(evaluator_scores, term, strict=True)]


def scores_below(floor: float, engine_scores: Sequence[object]) -> list[float]:
    """Scores for unread hits kept, in the engine's order, after read hits whose lowest score is ``floor``.

    Each is ``floor - 1 + s / (1 + s)`` for engine score ``s``: a monotone map into ``[floor - 1, floor)``,
    so the engine's gaps still show, whatever the sign of ``floor`` (a fused score may be 0 or
    negative, where a product with ``floor`` would turn the order over). A score that is not
    usable (null, negative, non-finite) maps as 0. Each is also capped just under ``floor`` and
    under the one before: rounding must not reach ``floor``, and the engine's order, not its
    scores, is what must descend.
    """
    mapped: list[float] = []
    cap = math.nextafter(floor, -math.inf)
    for score in engine_scores:
        engine = _engine_value(score) or 0.0
        cap = min(cap, floor - 1 + engine / (1 + engine))
        mapped.append(cap)
    return mapped
