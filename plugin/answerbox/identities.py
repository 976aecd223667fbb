"""Who a caller is, as OpenSearch's security plugin says (``GET /_plugins/_security/authinfo``).

A memory belongs to whoever created it. Without the security plugin there are no users (the
endpoint does not exist) and, as in ml-commons, every caller sees every memory. Any other
failure to learn who the caller is refuses the request: it never falls back to "no user".
"""

from __future__ import annotations

from opensearchpy import AsyncOpenSearch

from answerbox.core.digest import json_digest
from answerbox.core.errors import UpstreamError
from answerbox.core.ttl_cache import TTLCache
from answerbox.opensearch import Caller, translate

__all__ = ["Identities"]

_AUTHINFO = "/_plugins/_security/authinfo"
# How OpenSearch answers a path no plugin serves: 400 "no handler found" (404 behind some proxies).
_NO_HANDLER = (400, 404)


class Identities:
    def __init__(self, client: AsyncOpenSearch, *, ttl_s: float = 60.0, max_entries: int = 4096) -> None:
        self._client = client  # carries no credentials of its own: the caller's go with each call
        self._users: TTLCache[tuple[str | None]] = TTLCache(max_entries, ttl_s)

    async def user(self, caller: Caller) -> str | None:
        """The caller's user name; None only where the cluster has no security plugin."""
        key = json_digest(caller.credentials)
        cached = self._users.get(key)
        if cached is not None:
            return cached[0]
        try:
            info = await translate(self._client.transport.perform_request("GET", _AUTHINFO, headers=caller.as_dict()))
        except UpstreamError as exc:
            if exc.status not in _NO_HANDLER or "no handler" not in str(exc.body):
                raise
            user = None
        else:
            name = info.get("user_name") if isinstance(info, dict) else None
            if not isinstance(name, str) or not name:
                raise UpstreamError(502, {"reason": "the security plugin's authinfo named no user"})
            user = name
        self._users.put(key, (user,))
        return user
