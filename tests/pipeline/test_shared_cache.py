"""The expansion cache kept in OpenSearch: an entry expires, and expired entries are deleted
(nothing else purges an index that any stored pipeline writes to)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from answerbox.shared_cache import SharedCache
from opensearchpy import AsyncOpenSearch

INDEX = ".answerbox-cache-test"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def client(osmem_url: str) -> AsyncIterator[AsyncOpenSearch]:
    opensearch = AsyncOpenSearch(hosts=[osmem_url])
    yield opensearch
    await opensearch.close()


async def _ids(client: AsyncOpenSearch) -> set[str]:
    await client.indices.refresh(index=INDEX)
    found = await client.search(index=INDEX, body={"query": {"match_all": {}}, "size": 100})
    return {hit["_id"] for hit in found["hits"]["hits"]}


async def test_expired_entries_are_missed_then_purged_by_a_later_write(client: AsyncOpenSearch) -> None:
    clock = Clock()
    cache = SharedCache(client, INDEX, clock=clock, purge_every_s=60)
    await cache.put("short", "a", ttl_s=10)
    await cache.put("long", "b", ttl_s=1_000)
    assert await cache.get("short") == "a"
    clock.now += 30
    assert await cache.get("short") is None
    assert await cache.get("long") == "b"
    await cache.put("other", "c", ttl_s=1_000)  # within 60 s of the last purge: none
    assert await _ids(client) == {"short", "long", "other"}
    clock.now += 60
    await cache.put("later", "d", ttl_s=1_000)
    assert await _ids(client) == {"long", "other", "later"}
