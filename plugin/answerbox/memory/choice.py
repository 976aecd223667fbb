"""Which memory a cluster gets: ml-commons' own where the cluster has it, else answerbox's index.

``memory.backend`` decides; ``auto`` asks the cluster once which plugins it runs (with the
service account) and keeps the answer for the app's life. A failed question is not kept:
the request that asked fails, and the next one asks again.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from answerbox.core.config import MemorySettings
from answerbox.identities import Identities
from answerbox.memory.cluster import ClusterMemory
from answerbox.memory.own_index import IndexMemory
from answerbox.memory.records import Interaction, NewMessage
from answerbox.opensearch import JSON, Caller, OpenSearchClients, translate

__all__ = ["ConversationStore", "Memory"]

_ML_COMMONS = "opensearch-ml"


class ConversationStore(Protocol):
    """What a search with a ``memory_id`` reads and writes."""

    async def history(self, caller: Caller, memory_id: str, size: int) -> list[Interaction]: ...

    async def add_message(self, caller: Caller, memory_id: str, message: NewMessage) -> JSON: ...


class Memory:
    def __init__(self, settings: MemorySettings, clients: OpenSearchClients) -> None:
        # Who each caller is: the conversations' owners, and the searches' fair shares.
        self.identities = Identities(clients.caller)
        self.own = IndexMemory(
            caller_client=clients.caller,
            service_client=clients.service,
            index=settings.index,
            identities=self.identities,
        )
        self._cluster = ClusterMemory(clients.caller)
        self._service = clients.service
        self._in_cluster: bool | None = {"auto": None, "ml_commons": True, "answerbox": False}[settings.backend]
        self._lock = asyncio.Lock()

    async def in_cluster(self) -> bool:
        """Whether the cluster keeps memories itself (ml-commons)."""
        if self._in_cluster is not None:
            return self._in_cluster
        async with self._lock:
            if self._in_cluster is None:
                plugins = await translate(self._service.cat.plugins(params={"format": "json"}))
                self._in_cluster = any(isinstance(p, dict) and p.get("component") == _ML_COMMONS for p in plugins or [])
            return self._in_cluster

    async def store(self) -> ConversationStore:
        return self._cluster if await self.in_cluster() else self.own
