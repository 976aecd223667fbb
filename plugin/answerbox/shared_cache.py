"""A key → text cache kept in an OpenSearch index, so every answerbox replica shares it.

Read and written with the service credentials. Keys are digests: whoever stores a value
derived from documents (PRF expansions) puts the caller's credentials into its key, so an
entry is only ever found again by the same caller. The cache is an optimisation: when
OpenSearch cannot serve it, a read is a miss and a write is skipped, never an error.
Expired entries are deleted by a write, at most once every ``purge_every_s``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from opensearchpy import AsyncOpenSearch

from answerbox.core.errors import UpstreamError, UpstreamUnavailable
from answerbox.opensearch import ensure_index, translate

__all__ = ["SharedCache"]

log = logging.getLogger(__name__)

_MAPPING = {
    "mappings": {
        "dynamic": False,
        "properties": {"value": {"type": "text", "index": False}, "expires_at": {"type": "double"}},
    }
}


class SharedCache:
    def __init__(
        self, client: AsyncOpenSearch, index: str, clock: Callable[[], float] = time.time, purge_every_s: float = 600.0
    ) -> None:
        self._client = client
        self._index = index
        self._clock = clock  # wall clock: replicas compare each other's expiry times
        self._ready = False
        self._purge_every_s = purge_every_s
        self._purged_at = -float("inf")

    async def get(self, key: str) -> str | None:
        try:
            doc = await translate(self._client.get(index=self._index, id=key))
        except (UpstreamError, UpstreamUnavailable) as exc:
            if exc.status != 404:
                log.warning("shared cache %s: read failed: %s", self._index, exc.reason)
            return None
        source = doc.get("_source") or {}
        value, expires_at = source.get("value"), source.get("expires_at")
        if not isinstance(value, str) or not isinstance(expires_at, int | float) or expires_at <= self._clock():
            return None
        return value

    async def put(self, key: str, value: str, ttl_s: float) -> None:
        try:
            if not self._ready:
                await ensure_index(self._client, self._index, _MAPPING)
                self._ready = True
            now = self._clock()
            await translate(
                self._client.index(index=self._index, id=key, body={"value": value, "expires_at": now + ttl_s})
            )
            if now - self._purged_at >= self._purge_every_s:
                self._purged_at = now
                expired = {"query": {"range": {"expires_at": {"lte": now}}}}
                await translate(
                    self._client.delete_by_query(index=self._index, body=expired, params={"conflicts": "proceed"})
                )
        except (UpstreamError, UpstreamUnavailable) as exc:
            log.warning("shared cache %s: write failed: %s", self._index, exc.reason)
