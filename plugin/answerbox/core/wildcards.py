"""OpenSearch's simple wildcards: ``*`` stands for any run of characters, every other character
for itself (``?`` and ``[`` included, as in OpenSearch's ``Regex.simpleMatch``).

Matched without regular expressions: a caller's pattern compiled with ``.*`` for each ``*``
backtracks exponentially on a key it cannot match (28 stars held the server for seconds, and
``re`` holds the interpreter lock while it does). Here the pattern's literal pieces are found
left to right, each at its first place after the one before, which is exact for ``*`` alone:
time linear in the key per piece, no memory kept.
"""

from __future__ import annotations

__all__ = ["MAX_WILDCARDS", "simple_match", "wildcards"]

# More ``*`` than any name or path a client writes: callers' patterns past it are refused (or,
# where refusing is not the caller's answer, read as matching everything, which refuses more).
MAX_WILDCARDS = 16


def wildcards(pattern: str) -> int:
    """How many ``*`` the pattern holds once each run of them counts as one."""
    return sum(1 for piece in pattern.split("*")[1:-1] if piece) + (pattern.count("*") > 0)


def simple_match(pattern: str, text: str) -> bool:
    """Whether ``text`` is all of ``pattern``, each ``*`` taking any run of characters."""
    if "*" not in pattern:
        return pattern == text
    first, *middle, last = pattern.split("*")
    if len(first) + len(last) > len(text) or not text.startswith(first) or not text.endswith(last):
        return False
    at, end = len(first), len(text) - len(last)
    for piece in middle:
        if piece:
            found = text.find(piece, at, end)
            if found < 0:
                return False
            at = found + len(piece)
    return True
