"""An in-process LRU cache whose entries also expire: bounded however many keys callers invent."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["TTLCache"]

V = TypeVar("V")


class TTLCache(Generic[V]):
    """At most ``max_entries`` values, least recently used evicted first, each dropped ``ttl_s`` after it was stored.

    ``max_entries=0`` or ``ttl_s=0`` keeps nothing. Not thread-safe: it lives on one event loop.
    """

    def __init__(self, max_entries: int, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        if max_entries < 0 or ttl_s < 0:
            raise ValueError(f"max_entries and ttl_s must be >= 0, got {max_entries} and {ttl_s}")
        self._max = max_entries
        self._ttl = ttl_s
        self._clock = clock
        self._entries: OrderedDict[str, tuple[float, V]] = OrderedDict()

    def get(self, key: str) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, value = entry
        if self._clock() >= expires:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return value

    def put(self, key: str, value: V) -> None:
        if self._max == 0 or self._ttl == 0:
            return
        self._entries[key] = (self._clock() + self._ttl, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    def drop(self, key: str) -> None:
        self._entries.pop(key, None)
