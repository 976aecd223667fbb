"""TTLCache with an injected clock: expiry, keep-nothing settings and the size bound, no sleeping."""

from __future__ import annotations

import pytest
from answerbox.core.ttl_cache import TTLCache


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_an_entry_is_served_until_its_ttl_and_dropped_from_then_on() -> None:
    clock = Clock()
    cache: TTLCache[str] = TTLCache(max_entries=10, ttl_s=5, clock=clock)
    cache.put("q", "expansion")
    clock.now += 4.999
    assert cache.get("q") == "expansion"
    clock.now += 0.001
    assert cache.get("q") is None
    clock.now -= 1  # gone for good, not merely hidden
    assert cache.get("q") is None


def test_storing_again_restarts_the_ttl() -> None:
    clock = Clock()
    cache: TTLCache[str] = TTLCache(max_entries=10, ttl_s=5, clock=clock)
    cache.put("q", "old")
    clock.now += 4
    cache.put("q", "new")
    clock.now += 4
    assert cache.get("q") == "new"


@pytest.mark.parametrize(("max_entries", "ttl_s"), [(0, 60), (10, 0)])
def test_zero_entries_or_zero_ttl_keeps_nothing(max_entries: int, ttl_s: float) -> None:
    cache: TTLCache[str] = TTLCache(max_entries=max_entries, ttl_s=ttl_s, clock=Clock())
    cache.put("q", "expansion")
    assert cache.get("q") is None


def test_the_least_recently_used_entry_goes_first() -> None:
    cache: TTLCache[int] = TTLCache(max_entries=2, ttl_s=60, clock=Clock())
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # now "b" is the least recently used
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)


def test_drop_removes_one_entry() -> None:
    cache: TTLCache[int] = TTLCache(max_entries=2, ttl_s=60, clock=Clock())
    cache.put("a", 1)
    cache.put("b", 2)
    cache.drop("a")
    cache.drop("missing")
    assert (cache.get("a"), cache.get("b")) == (None, 2)


@pytest.mark.parametrize(("max_entries", "ttl_s"), [(-1, 60), (10, -0.5)])
def test_negative_bounds_are_refused(max_entries: int, ttl_s: float) -> None:
    with pytest.raises(ValueError, match="must be >= 0"):
        TTLCache[int](max_entries=max_entries, ttl_s=ttl_s)
