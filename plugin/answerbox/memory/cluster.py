"""The cluster's own conversational memory (ml-commons), for the pipeline's reads and writes.

The memory API itself passes through to the cluster untouched (``http/memory.py``); this is
what a search with a ``memory_id`` needs of it, asked with the caller's own credentials.
"""

from __future__ import annotations

from urllib.parse import quote

from opensearchpy import AsyncOpenSearch

from answerbox.memory.records import Interaction, NewMessage
from answerbox.opensearch import JSON, Caller, translate

__all__ = ["ClusterMemory"]

_MEMORY = "/_plugins/_ml/memory"


class ClusterMemory:
    def __init__(self, client: AsyncOpenSearch) -> None:
        self._client = client  # carries no credentials of its own

    async def history(self, caller: Caller, memory_id: str, size: int) -> list[Interaction]:
        page = await self._request(
            caller, "GET", f"{_MEMORY}/{quote(memory_id, safe='')}/messages", params={"max_results": str(size)}
        )
        messages = page.get("messages") if isinstance(page, dict) else None
        return [Interaction.from_message(m) for m in reversed(messages or []) if isinstance(m, dict)]

    async def add_message(self, caller: Caller, memory_id: str, message: NewMessage) -> JSON:
        body = message.model_dump(exclude_none=True)
        return await self._request(caller, "POST", f"{_MEMORY}/{quote(memory_id, safe='')}/messages", body=body)

    async def _request(
        self, caller: Caller, method: str, path: str, *, params: dict[str, str] | None = None, body: JSON | None = None
    ) -> JSON:
        result: JSON = await translate(
            self._client.transport.perform_request(method, path, params=params, body=body, headers=caller.as_dict())
        )
        return result
