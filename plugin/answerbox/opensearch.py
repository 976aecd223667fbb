"""The searches answerbox itself sends to OpenSearch, through opensearch-py (async).

Two clients: one carries no credentials of its own and sends each search with the
caller's headers, so answerbox never widens what a caller can read; the other holds the
service credentials and only touches answerbox's own indices (pipelines, the shared
expansion cache) and reads index settings.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opensearchpy import AsyncConnection, AsyncOpenSearch
from opensearchpy.exceptions import ConnectionError as OSConnectionError
from opensearchpy.exceptions import ConnectionTimeout, TransportError

from answerbox.core.config import OpenSearchSettings
from answerbox.core.digest import json_digest
from answerbox.core.errors import InvalidRequest, UpstreamError, UpstreamTimeout, UpstreamUnavailable
from answerbox.core.ttl_cache import TTLCache

__all__ = ["JSON", "Caller", "OpenSearchClients", "SearchBackend", "ensure_index", "translate", "with_pipeline"]

# Headers that identify the caller to OpenSearch's security plugin.
_CREDENTIAL_HEADERS = ("authorization", "cookie", "securitytenant", "x-opaque-id")

JSON = dict[str, Any]

# Alias lookups, keyed by caller and target: bounded, so invented targets cannot grow memory;
# brief, so a filter an administrator adds to an alias binds within seconds.
_MAX_ALIASES_CACHED = 4096
_ALIASES_CACHE_S = 5.0


@dataclass(frozen=True, kw_only=True)
class Caller:
    """The caller's own identity, forwarded with every search answerbox makes for it."""

    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> Caller:
        return cls(headers=tuple((k, headers[k]) for k in _CREDENTIAL_HEADERS if k in headers))

    def as_dict(self) -> dict[str, str]:
        return dict(self.headers)

    @property
    def credentials(self) -> list[tuple[str, str]]:
        """Who the caller is, for caches and fair shares: its headers less ``x-opaque-id``,
        which names a request, not a caller."""
        return [h for h in self.headers if h[0] != "x-opaque-id"]


def _client(
    settings: OpenSearchSettings, *, with_service_auth: bool, connection_class: type[AsyncConnection] | None
) -> AsyncOpenSearch:
    auth = None
    if with_service_auth and settings.service_username:
        password = settings.service_password.get_secret_value() if settings.service_password else ""
        auth = (settings.service_username, password)
    return AsyncOpenSearch(
        hosts=[settings.url],
        http_auth=auth,
        verify_certs=settings.verify_certs,
        ca_certs=str(settings.ca_certs) if settings.ca_certs else None,
        timeout=settings.request_timeout_s,
        max_retries=0,
        retry_on_timeout=False,
        maxsize=settings.max_connections,
        connection_class=connection_class,  # None: opensearch-py's own (aiohttp)
    )


async def translate(call: Any) -> Any:
    """Await an opensearch-py call, mapping its errors onto answerbox's."""
    try:
        return await call
    except ConnectionTimeout as exc:
        raise UpstreamTimeout.after(exc) from exc
    except OSConnectionError as exc:
        raise UpstreamUnavailable.unreachable(exc.info or exc) from exc
    except TransportError as exc:
        status = exc.status_code if isinstance(exc.status_code, int) else 502
        raise UpstreamError(status, exc.info) from exc


async def ensure_index(client: AsyncOpenSearch, index: str, body: JSON) -> None:
    """Create one of answerbox's own indices unless it exists (another replica may win the race)."""
    if await translate(client.indices.exists(index=index)):
        return
    try:
        await translate(client.indices.create(index=index, body=body))
    except UpstreamError as exc:
        if "resource_already_exists" not in str(exc.body):
            raise


# opensearch-py takes these of a call's parameters as its own and never sends them: ``ignore``
# (statuses not to raise for) and ``request_timeout`` (its timeout; without it, the caller's
# ``timeout``, OpenSearch's time budget for the search, would become the client's). Neither is
# an OpenSearch parameter, so they are refused as OpenSearch refuses them.
_CLIENT_PARAMS = ("ignore", "request_timeout")


class SearchBackend:
    """Searches run on the caller's behalf; processors reach it only through ``ScopedSearch``."""

    def __init__(self, client: AsyncOpenSearch, *, request_timeout_s: float) -> None:
        self._client = client
        self._request_timeout_s = request_timeout_s
        self._aliases: TTLCache[JSON] = TTLCache(_MAX_ALIASES_CACHED, _ALIASES_CACHE_S)

    def _sent(self, params: Mapping[str, str], path: str) -> dict[str, Any]:
        """The caller's ``params`` as OpenSearch must get them, ``timeout`` included."""
        for name in _CLIENT_PARAMS:
            if name in params:
                raise InvalidRequest(f"request [{path}] contains unrecognized parameter: [{name}]")
        return {**params, "request_timeout": self._request_timeout_s}

    async def search(
        self, *, index: str | None, body: JSON, params: Mapping[str, str], caller: Caller, pipeline: JSON | None = None
    ) -> JSON:
        """``pipeline`` is the OpenSearch-side part of the running pipeline (``ctx.native``), so a
        processor's own searches get the same ``filter_query`` and the like as the user's search."""
        result: JSON = await translate(
            self._client.search(
                index=index,
                body=with_pipeline(body, pipeline),
                params=self._sent(params, f"/{index}/_search" if index else "/_search"),
                headers=caller.as_dict(),
            )
        )
        return result

    async def aliases(self, *, index: str, params: Mapping[str, str], caller: Caller) -> JSON:
        """``GET /{index}/_alias`` as the caller: each index ``index`` resolves to (``params``:
        how it resolves, as the caller's search resolves it), with all its aliases; cached briefly
        per caller, target and parameters. The caller's credentials decide what it may see of them."""
        key = json_digest([caller.credentials, index, dict(params)])
        found = self._aliases.get(key)
        if found is None:
            found = await translate(
                self._client.indices.get_alias(index=index, params=dict(params), headers=caller.as_dict())
            )
            self._aliases.put(key, found)
        return found

    async def msearch(
        self,
        *,
        searches: Sequence[tuple[JSON, JSON]],
        params: Mapping[str, str],
        caller: Caller,
        pipeline: JSON | None = None,
        inline: bool = True,
    ) -> JSON:
        """One `_msearch` for several (header, body) pairs; the answer keeps their order.

        ``inline=False`` sends the bodies as they are: a caller's own lines, each already
        carrying the pipeline OpenSearch must run (or none, to leave it to OpenSearch)."""
        lines: list[JSON] = [
            line for header, body in searches for line in (header, with_pipeline(body, pipeline) if inline else body)
        ]
        sent = self._sent(params, "/_msearch")
        result: JSON = await translate(self._client.msearch(body=lines, params=sent, headers=caller.as_dict()))
        return result


def with_pipeline(body: JSON, pipeline: JSON | None) -> JSON:
    """Every search answerbox sends names its OpenSearch-side pipeline inline (empty when there is
    none): an index default naming an answerbox pipeline would otherwise be rejected by OpenSearch."""
    if "search_pipeline" in body:
        return body
    return {**body, "search_pipeline": pipeline or {}}


class OpenSearchClients:
    """Owns both clients for the app's lifetime."""

    def __init__(self, settings: OpenSearchSettings, *, connection_class: type[AsyncConnection] | None = None) -> None:
        """``connection_class`` carries both clients' requests instead of aiohttp (a test's in-process cluster)."""
        # No credentials of its own: every call carries the caller's headers.
        self.caller = _client(settings, with_service_auth=False, connection_class=connection_class)
        self.service = _client(settings, with_service_auth=True, connection_class=connection_class)
        self.search = SearchBackend(self.caller, request_timeout_s=settings.request_timeout_s)

    async def aclose(self) -> None:
        await asyncio.gather(self.caller.close(), self.service.close())
