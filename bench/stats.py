"""Summary statistics the benches print."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["quantile"]


def quantile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (``q`` in [0, 1]); NaN for no values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")
