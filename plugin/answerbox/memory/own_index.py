"""answerbox's own memory store, for clusters without ml-commons: one index, ``.answerbox-memory``.

Every read goes with the caller's own credentials, so OpenSearch's permissions on the index
(document-level security on ``user``) still apply; on top of them a memory belongs to the user
who created it (the one authinfo names), and another user's memory, or a message in it, is "not
found" (a 404, as in OpenSearch). Every write goes with the service account, and only after such
a read of the caller's proved the memory theirs: document-level security filters reads only, so
a caller who could write the index could put a message into anyone's memory. Callers need only
read it. Answers are in ml-commons' shapes.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from opensearchpy import AsyncOpenSearch

from answerbox.core.errors import ResourceNotFound, UpstreamError
from answerbox.identities import Identities
from answerbox.memory.records import Interaction, MemoryFields, MessageUpdate, NewMessage, Paging
from answerbox.opensearch import JSON, Caller, ensure_index, translate

__all__ = ["IndexMemory"]

_KEYWORD = {"type": "keyword"}
_STORED = {"type": "text", "index": False}
_MAPPINGS: JSON = {
    "dynamic": "strict",
    "properties": {
        "kind": _KEYWORD,  # memory | message
        "user": _KEYWORD,
        "memory_id": _KEYWORD,
        "parent_message_id": _KEYWORD,
        "trace_number": {"type": "long"},
        "name": _STORED,
        "input": _STORED,
        "prompt_template": _STORED,
        "response": _STORED,
        "origin": _KEYWORD,
        "additional_info": {"type": "object", "enabled": False},
        "create_time": {"type": "date"},
        "updated_time": {"type": "date"},
        # Nanoseconds: orders what one millisecond (a date's precision) cannot.
        "order": {"type": "long"},
    },
}
_MEMORY_FIELDS = ("name", "user", "create_time", "updated_time")
_MESSAGE_FIELDS = (
    "memory_id", "create_time", "updated_time", "input", "prompt_template", "response", "origin",
    "additional_info", "parent_message_id", "trace_number",
)  # fmt: skip


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


class IndexMemory:
    def __init__(
        self, *, caller_client: AsyncOpenSearch, service_client: AsyncOpenSearch, index: str, identities: Identities
    ) -> None:
        self._client = caller_client  # carries no credentials of its own: every read is the caller's
        self._service = service_client  # every write, once the caller's own read allowed it
        self.index = index
        self._identities = identities
        self._ready = False

    # --- memories ---------------------------------------------------------------------------

    async def create(self, caller: Caller, fields: MemoryFields) -> JSON:
        user = await self._identities.user(caller)
        await self._readable(caller)
        now = _now()
        doc = {
            "kind": "memory",
            "name": fields.name or "",
            "user": user,
            "create_time": now,
            "updated_time": now,
            "order": time.time_ns(),
        }
        return {"memory_id": await self._write(doc)}

    async def get(self, caller: Caller, memory_id: str) -> JSON:
        source = await self._owned(caller, memory_id, "memory")
        return {"memory_id": memory_id, **{name: source.get(name) for name in _MEMORY_FIELDS}}

    async def memories(self, caller: Caller, paging: Paging) -> JSON:
        user = await self._identities.user(caller)
        hits, more = await self._search(
            caller, [_term("kind", "memory"), *_owner(user)], ("updated_time", "desc"), paging
        )
        memories = [
            {"memory_id": hit["_id"], **{name: hit["_source"].get(name) for name in _MEMORY_FIELDS}} for hit in hits
        ]
        return _page("memories", memories, paging, more)

    async def update(self, caller: Caller, memory_id: str, fields: MemoryFields) -> JSON:
        await self._owned(caller, memory_id, "memory")
        return await self._update(memory_id, {"name": fields.name or "", "updated_time": _now()})

    async def delete(self, caller: Caller, memory_id: str) -> JSON:
        await self._owned(caller, memory_id, "memory")
        await translate(
            self._service.delete_by_query(
                index=self.index, body={"query": _filters([_term("memory_id", memory_id)])}, params={"refresh": "true"}
            )
        )
        await translate(self._service.delete(index=self.index, id=memory_id, params={"refresh": "true"}))
        return {"success": True}

    # --- messages ---------------------------------------------------------------------------

    async def add_message(self, caller: Caller, memory_id: str, message: NewMessage) -> JSON:
        memory = await self._owned(caller, memory_id, "memory")
        if message.parent_message_id is not None:
            parent = await self._message(caller, message.parent_message_id)
            if parent["memory_id"] != memory_id:
                raise ResourceNotFound(f"Message [{message.parent_message_id}] not found in memory [{memory_id}]")
        now = _now()
        doc = {
            **message.model_dump(),
            "additional_info": message.additional_info or {},
            "kind": "message",
            "memory_id": memory_id,
            "user": memory.get("user"),
            "create_time": now,
            "updated_time": now,
            "order": time.time_ns(),
        }
        message_id = await self._write(doc)
        await self._update(memory_id, {"updated_time": now})
        return {"message_id": message_id}

    async def messages(self, caller: Caller, memory_id: str, paging: Paging) -> JSON:
        """A memory's messages, newest first (its traces are not among them)."""
        await self._owned(caller, memory_id, "memory")
        filters = [_term("kind", "message"), _term("memory_id", memory_id)]
        hits, more = await self._search(caller, filters, ("order", "desc"), paging, without="parent_message_id")
        return _page("messages", [_message_body(hit) for hit in hits], paging, more)

    async def message(self, caller: Caller, message_id: str) -> JSON:
        return await self._message(caller, message_id)

    async def update_message(self, caller: Caller, message_id: str, update: MessageUpdate) -> JSON:
        await self._message(caller, message_id)
        return await self._update(message_id, {"additional_info": update.additional_info, "updated_time": _now()})

    async def traces(self, caller: Caller, message_id: str, paging: Paging) -> JSON:
        """The message's traces, by ``trace_number``."""
        await self._message(caller, message_id)
        filters = [_term("kind", "message"), _term("parent_message_id", message_id)]
        hits, more = await self._search(caller, filters, ("trace_number", "asc"), paging)
        return _page("traces", [_message_body(hit) for hit in hits], paging, more)

    async def history(self, caller: Caller, memory_id: str, size: int) -> list[Interaction]:
        """The last ``size`` interactions, oldest first: what a follow-up is read against."""
        page = await self.messages(caller, memory_id, Paging(max_results=size))
        return [Interaction.from_message(m) for m in reversed(page["messages"])]

    # --- the index ----------------------------------------------------------------------------

    async def _message(self, caller: Caller, message_id: str) -> JSON:
        return _message_body({"_id": message_id, "_source": await self._owned(caller, message_id, "message")})

    async def _owned(self, caller: Caller, doc_id: str, kind: str) -> JSON:
        """The document's source when it is a ``kind`` this caller may see; else not found, whatever the reason."""
        await self._ensure()
        try:
            found = await translate(self._client.get(index=self.index, id=doc_id, headers=caller.as_dict()))
        except UpstreamError as exc:
            if exc.status != 404:
                raise
            found = None
        source = found.get("_source") if isinstance(found, dict) and found.get("found") else None
        if isinstance(source, dict) and source.get("kind") == kind:
            user = await self._identities.user(caller)
            if user is None or source.get("user") == user:
                return source
        raise ResourceNotFound(f"{kind.capitalize()} [{doc_id}] not found")

    async def _search(
        self, caller: Caller, filters: list[JSON], sort: tuple[str, str], paging: Paging, *, without: str | None = None
    ) -> tuple[list[JSON], bool]:
        await self._ensure()
        field, order = sort
        body = {
            "query": _filters(filters, without=without),
            "sort": [{field: order}, {"order": order}],
            "from": paging.next_token,
            "size": paging.max_results,
            "track_total_hits": True,
        }
        result = await translate(self._client.search(index=self.index, body=body, headers=caller.as_dict()))
        hits: list[JSON] = result["hits"]["hits"]
        return hits, paging.next_token + len(hits) < int(result["hits"]["total"]["value"])

    async def _readable(self, caller: Caller) -> None:
        """Refuses (OpenSearch's 403) a caller who may not read the store: a memory they could
        never read back is not created for them."""
        await self._ensure()
        await translate(
            self._client.search(
                index=self.index, body={"query": {"match_none": {}}, "size": 0}, headers=caller.as_dict()
            )
        )

    # Writes: only after the caller's own read (``_readable``, ``_memory``, ``_message``), which
    # also made sure the index exists.

    async def _write(self, doc: JSON) -> str:
        written = await translate(self._service.index(index=self.index, body=doc, params={"refresh": "true"}))
        return str(written["_id"])

    async def _update(self, doc_id: str, fields: JSON) -> JSON:
        result: JSON = await translate(
            self._service.update(index=self.index, id=doc_id, body={"doc": fields}, params={"refresh": "true"})
        )
        return result

    async def _ensure(self) -> None:
        if not self._ready:
            await ensure_index(
                self._service, self.index, {"settings": {"index": {"hidden": True}}, "mappings": _MAPPINGS}
            )
            self._ready = True


def _term(field: str, value: str) -> JSON:
    return {"term": {field: value}}


def _owner(user: str | None) -> list[JSON]:
    return [] if user is None else [_term("user", user)]


def _filters(filters: list[JSON], *, without: str | None = None) -> JSON:
    query: JSON = {"filter": filters}
    if without is not None:
        query["must_not"] = [{"exists": {"field": without}}]
    return {"bool": query}


def _message_body(hit: JSON) -> JSON:
    source = hit["_source"]
    return {
        "memory_id": source.get("memory_id"),
        "message_id": hit["_id"],
        **{n: source.get(n) for n in _MESSAGE_FIELDS[1:]},
    }


def _page(name: str, items: list[JSON], paging: Paging, more: bool) -> JSON:
    page: JSON = {name: items}
    if more:
        page["next_token"] = paging.next_token + paging.max_results
    return page
