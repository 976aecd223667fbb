"""An in-memory OpenSearch for the unit layer, reached through opensearch-py's own client.

``FakeOpenSearch.connection()`` is a connection class (``Transports.opensearch``) that hands every
request to this object instead of a socket: answerbox's clients, their serialising and their error
mapping run as they do against a cluster. It holds what answerbox's own indices and a test's seeded
documents need: documents by id, search with the queries answerbox and its tests send (``match_all``,
``match_none``, ``match``, ``multi_match``, ``term``, ``terms``, ``ids``, ``exists``, ``range``, ``bool``), sorting,
paging, ``_msearch``, index settings, reading aliases (``GET /{target}/_alias``: named exactly, never
searched through), ``_cat/plugins`` and no security plugin. Anything else it is
sent is refused with a 400, so a test never passes on a request the fake only pretended to serve.
The passthrough does not come here (its own HTTP client, left unreachable in the unit layer).
"""

from __future__ import annotations

import base64
import fnmatch
import itertools
import json
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, ClassVar
from urllib.parse import unquote

from opensearchpy import AsyncConnection

__all__ = ["FakeOpenSearch", "Sent"]

JSON = dict[str, Any]
_WORD = re.compile(r"\w+")
_READS = ("/_search", "/_msearch")
_SEARCH_KEYS = frozenset(
    {"query", "size", "from", "sort", "_source", "track_total_hits", "search_pipeline", "post_filter", "ext", "timeout"}
)


@dataclass(frozen=True)
class Sent:
    """One request as it reached the cluster: ``user`` is the connection's own (service) login,
    ``headers`` the ones sent with the call (the caller's)."""

    method: str
    path: str
    params: dict[str, str]
    body: Any  # parsed JSON; _msearch: its lines
    headers: dict[str, str]
    user: str | None


@dataclass
class _Index:
    docs: dict[str, JSON] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)
    aliases: dict[str, JSON] = field(default_factory=dict)  # name: its filter, routing, ...


class _Refused(Exception):
    def __init__(self, status: int, error_type: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.body: Any = {
            "error": {"root_cause": [{"type": error_type, "reason": reason}], "type": error_type, "reason": reason},
            "status": status,
        }


class FakeOpenSearch:
    def __init__(self, *, plugins: Iterable[str] = ()) -> None:
        self.indices: dict[str, _Index] = {}
        self.plugins = list(plugins)
        self.requests: list[Sent] = []
        self._ids = itertools.count(1)

    # --- what a test sets up and looks at --------------------------------------------------------

    def index_docs(
        self, index: str, docs: Iterable[Mapping[str, Any]], settings: Mapping[str, str] | None = None
    ) -> None:
        """Create ``index`` holding ``docs`` (each its ``_id`` or its position as id), as a bulk with
        refresh does; ``settings`` in their flat form (``index.search.default_pipeline``)."""
        created = self.indices.setdefault(index, _Index())
        created.settings.update(settings or {})
        for position, doc in enumerate(docs):
            source = dict(doc)
            created.docs[str(source.pop("_id", position))] = source

    def alias(self, index: str, name: str, **spec: Any) -> None:
        """Add the alias ``name`` of ``index``, ``spec`` as ``_aliases`` takes it (``filter``, ``search_routing``)."""
        self._index(index).aliases[name] = spec

    def source(self, index: str, doc_id: str) -> JSON | None:
        found = self.indices.get(index)
        return None if found is None else found.docs.get(doc_id)

    def sent(self, path: str, method: str | None = None) -> list[Sent]:
        """The requests to ``path`` (an fnmatch pattern), optionally of one method."""
        return [
            r for r in self.requests if fnmatch.fnmatchcase(r.path, path) and (method is None or r.method == method)
        ]

    def changes(self) -> list[Sent]:
        """The requests that were not reads (a search, a get): writes, deletes, the rights probe."""
        return [r for r in self.requests if r.method not in ("GET", "HEAD") and not r.path.endswith(_READS)]

    def connection(self) -> type[AsyncConnection]:
        cluster = self

        class _Connection(_FakeConnection):
            fake = cluster

        return _Connection

    # --- the REST API -------------------------------------------------------------------------------

    def handle(self, method: str, path: str, params: dict[str, str], body: Any) -> tuple[int, Any]:
        parts = [unquote(p) for p in path.strip("/").split("/") if p]
        try:
            return self._route(method, parts, params, body)
        except _Refused as refused:
            return refused.status, refused.body

    def _route(self, method: str, parts: list[str], params: dict[str, str], body: Any) -> tuple[int, Any]:
        match parts:
            case []:
                return 200, {"version": {"number": "2.19.0", "distribution": "opensearch"}}
            case ["_cat", "plugins"]:
                return 200, [{"name": "node", "component": p, "version": "2.19.0"} for p in self.plugins]
            case ["_cluster", "health"] if method == "GET":
                return 200, {"cluster_name": "fake", "status": "green"}
            case ["_plugins", "_security", *_]:
                return 400, {"error": f"no handler found for uri [/{'/'.join(parts)}] and method [{method}]"}
            case ["_search"] | [_, "_search"] if method in ("GET", "POST"):
                return 200, self._search(parts[0] if len(parts) == 2 else None, body or {}, params)
            case ["_msearch"] | [_, "_msearch"] if method in ("GET", "POST"):
                return 200, self._msearch(parts[0] if len(parts) == 2 else None, body, params)
            case [index] if method == "HEAD":
                return (200 if index in self.indices else 404), None
            case [index] if method == "PUT":
                if index in self.indices:
                    raise _Refused(400, "resource_already_exists_exception", f"index [{index}] already exists")
                self.indices[index] = _Index()
                return 200, {"acknowledged": True, "shards_acknowledged": True, "index": index}
            case [target, "_alias"] if method == "GET":
                return 200, self._aliases(target, params)
            case [target, "_settings", *names] if method == "GET":
                return 200, self._settings(target, names, params)
            case [index, "_doc"] if method == "POST":
                return self._put(index, f"fake{next(self._ids)}", body)
            case [index, "_doc", doc_id] if method in ("PUT", "POST"):
                return self._put(index, doc_id, body)
            case [index, "_doc", doc_id] if method == "GET":
                docs = self._index(index).docs
                found = {"_index": index, "_id": doc_id, "found": doc_id in docs}
                if doc_id not in docs:
                    return 404, found
                return 200, {**found, "_version": self._index(index).versions[doc_id], "_source": docs[doc_id]}
            case [index, "_doc", doc_id] if method == "DELETE":
                gone = self._index(index).docs.pop(doc_id, None)
                return (
                    (404, {"_index": index, "_id": doc_id, "result": "not_found"})
                    if gone is None
                    else (
                        200,
                        {"_index": index, "_id": doc_id, "result": "deleted"},
                    )
                )
            case [index, "_update", doc_id] if method == "POST":
                docs = self._index(index).docs
                if doc_id not in docs:
                    raise _Refused(404, "document_missing_exception", f"[{doc_id}]: document missing")
                docs[doc_id] = _merged(docs[doc_id], body["doc"])
                return 200, self._written(index, doc_id, "updated")
            case [index, "_delete_by_query"] if method == "POST":
                docs = self._index(index).docs
                doomed = [doc_id for doc_id, source in docs.items() if _matches(body.get("query"), source, doc_id)[0]]
                for doc_id in doomed:
                    del docs[doc_id]
                return 200, {"deleted": len(doomed), "failures": []}
        raise _Refused(400, "illegal_argument_exception", f"the fake cluster serves no [{method} /{'/'.join(parts)}]")

    def _index(self, name: str) -> _Index:
        found = self.indices.get(name)
        if found is None:
            raise _Refused(404, "index_not_found_exception", f"no such index [{name}]")
        return found

    def _put(self, index: str, doc_id: str, body: JSON) -> tuple[int, JSON]:
        docs = self.indices.setdefault(index, _Index()).docs
        result = "updated" if doc_id in docs else "created"
        docs[doc_id] = dict(body)
        return (200 if result == "updated" else 201), self._written(index, doc_id, result)

    def _written(self, index: str, doc_id: str, result: str) -> JSON:
        versions = self.indices[index].versions
        versions[doc_id] = versions.get(doc_id, 0) + 1
        return {"_index": index, "_id": doc_id, "_version": versions[doc_id], "result": result}

    def _targets(self, target: str | list[str] | None, params: Mapping[str, str]) -> list[str]:
        names = target if isinstance(target, list) else (target or "_all").split(",")
        found: list[str] = []
        for name in names:
            if name in ("_all", "*") or any(c in name for c in "*?"):
                pattern = "*" if name == "_all" else name
                found += [i for i in self.indices if fnmatch.fnmatchcase(i, pattern) and not i.startswith(".")]
            elif name in self.indices:
                found.append(name)
            elif params.get("ignore_unavailable") != "true":
                raise _Refused(404, "index_not_found_exception", f"no such index [{name}]")
        return list(dict.fromkeys(found))

    def _aliases(self, target: str, params: Mapping[str, str]) -> JSON:
        """Every index ``target`` names, itself or by one of its aliases, with all its aliases."""
        names = target.split(",")
        aliased = [index for index, found in self.indices.items() if set(names) & set(found.aliases)]
        indices = [n for n in names if not any(n in found.aliases for found in self.indices.values())]
        resolved = dict.fromkeys(aliased + (self._targets(indices, params) if indices else []))
        return {index: {"aliases": dict(self.indices[index].aliases)} for index in resolved}

    def _settings(self, target: str, names: list[str], params: Mapping[str, str]) -> JSON:
        wanted = names[0].split(",") if names else ["*"]
        return {
            index: {
                "settings": {
                    k: v
                    for k, v in self.indices[index].settings.items()
                    if any(fnmatch.fnmatchcase(k, w) for w in wanted)
                }
            }
            for index in self._targets(target, params)
        }

    def _search(self, target: str | list[str] | None, body: JSON, params: Mapping[str, str]) -> JSON:
        unknown = set(body) - _SEARCH_KEYS
        if unknown:
            raise _Refused(400, "parsing_exception", f"Unknown key for a START_OBJECT in [{sorted(unknown)[0]}].")
        if body.get("search_pipeline") not in (None, {}):
            raise _Refused(400, "illegal_argument_exception", "the fake cluster runs no search pipeline of its own")
        scored = []
        for position, index in enumerate(self._targets(target, params)):
            for order, (doc_id, source) in enumerate(self.indices[index].docs.items()):
                matched, score = _matches(body.get("query"), source, doc_id)
                if matched and _matches(body.get("post_filter"), source, doc_id)[0]:
                    scored.append((score, (position, order), index, doc_id, source))
        sort = body.get("sort")
        if sort:
            for field_name, descending in reversed(_sort_keys(sort)):
                scored.sort(key=partial(_sort_key, name=field_name), reverse=descending)
        else:
            scored.sort(key=lambda s: (-s[0], s[1]))
        start = int(params.get("from", body.get("from", 0)))
        size = int(params.get("size", body.get("size", 10)))
        hits = [
            {
                "_index": index,
                "_id": doc_id,
                "_score": None if sort else score,
                **({} if body.get("_source") is False else {"_source": _filtered(source, body.get("_source"))}),
                **({"sort": [_sort_value(s, f) for f, _ in _sort_keys(sort)]} if sort else {}),
            }
            for s in scored[start : start + size]
            for score, _, index, doc_id, source in [s]
        ]
        best = max((s[0] for s in scored), default=None)
        return {
            "took": 1,
            "timed_out": False,
            "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
            "hits": {
                "total": {"value": len(scored), "relation": "eq"},
                "max_score": None if sort else best,
                "hits": hits,
            },
        }

    def _msearch(self, target: str | None, lines: list[JSON], params: Mapping[str, str]) -> JSON:
        responses: list[JSON] = []
        for header, body in zip(lines[::2], lines[1::2], strict=True):
            if header.get("search_pipeline") is not None:
                raise _Refused(400, "illegal_argument_exception", "the fake cluster runs no search pipeline of its own")
            try:
                responses.append({**self._search(header.get("index", target), body, params), "status": 200})
            except _Refused as refused:
                responses.append(refused.body)
        return {"took": 1, "responses": responses}


class _FakeConnection(AsyncConnection):
    """opensearch-py's connection contract, served by ``fake`` (set per cluster by ``connection()``)."""

    fake: ClassVar[FakeOpenSearch]

    def __init__(self, *, http_auth: Any = None, **kwargs: Any) -> None:
        super().__init__(**{k: v for k, v in kwargs.items() if k in ("host", "port", "url_prefix", "timeout")})
        self.user = http_auth[0] if isinstance(http_auth, tuple) else None

    async def perform_request(
        self,
        method: str,
        url: str,
        params: Mapping[str, Any] | None = None,
        body: bytes | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 - opensearch-py's signature
        ignore: Collection[int] = (),
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        text = body.decode() if isinstance(body, bytes) else body
        parsed: Any = None
        if text:
            lines = [json.loads(line) for line in text.splitlines() if line.strip()]
            parsed = lines if url.endswith("/_msearch") else lines[0]
        sent = {k.lower(): v for k, v in (headers or {}).items()}
        query = {k: str(v) for k, v in (params or {}).items()}
        self.fake.requests.append(Sent(method, url.split("?")[0], query, parsed, sent, self.user))
        status, answer = self.fake.handle(method, url.split("?")[0], query, parsed)
        raw = "" if answer is None else json.dumps(answer)
        if not 200 <= status < 300 and status not in ignore:
            self._raise_error(status, raw, "application/json")
        return status, {"content-type": "application/json"}, raw

    async def close(self) -> None:
        return None


def _merged(source: JSON, update: JSON) -> JSON:
    """A partial update as OpenSearch applies one: objects merge, everything else is replaced."""
    merged = dict(source)
    for key, value in update.items():
        old = merged.get(key)
        merged[key] = _merged(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
    return merged


def basic(user: str, password: str = "x") -> dict[str, str]:
    """The authorization header of a caller."""
    return {"authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


# --- queries ---------------------------------------------------------------------------------------


def _words(value: Any) -> list[str]:
    if isinstance(value, list):
        return [w for v in value for w in _words(v)]
    return _WORD.findall(str(value).lower()) if value is not None else []


def _field(source: JSON, name: str) -> Any:
    value: Any = source
    for part in name.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _values(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [] if value is None else [value]


def _matches(query: JSON | None, source: JSON, doc_id: str) -> tuple[bool, float]:
    """Whether the document matches ``query``, and its score (matched query words for text)."""
    if query is None:
        return True, 1.0
    ((kind, spec),) = query.items()
    match kind:
        case "match_all":
            return True, 1.0
        case "match_none":
            return False, 0.0
        case "match":
            ((name, text),) = spec.items()
            text = text["query"] if isinstance(text, dict) else text
            present = set(_words(_field(source, name)))
            score = float(sum(1 for word in set(_words(text)) if word in present))
            return score > 0, score
        case "multi_match":
            scores = [_matches({"match": {f.split("^")[0]: spec["query"]}}, source, doc_id)[1] for f in spec["fields"]]
            return max(scores, default=0.0) > 0, max(scores, default=0.0)
        case "term":
            ((name, value),) = spec.items()
            value = value["value"] if isinstance(value, dict) else value
            return value in _values(_field(source, name)), 1.0
        case "terms":
            ((name, wanted),) = spec.items()
            return any(v in wanted for v in _values(_field(source, name))), 1.0
        case "ids":
            return doc_id in spec["values"], 1.0
        case "exists":
            return _field(source, spec["field"]) is not None, 1.0
        case "range":
            ((name, bounds),) = spec.items()
            value = _field(source, name)
            tests = {"gt": "__gt__", "gte": "__ge__", "lt": "__lt__", "lte": "__le__"}
            return value is not None and all(getattr(value, tests[k])(v) for k, v in bounds.items()), 1.0
        case "bool":
            return _bool(spec, source, doc_id)
    raise _Refused(400, "parsing_exception", f"unknown query [{kind}] (the fake cluster's)")


def _bool(spec: JSON, source: JSON, doc_id: str) -> tuple[bool, float]:
    def each(key: str) -> list[tuple[bool, float]]:
        clauses = spec.get(key, [])
        return [_matches(c, source, doc_id) for c in (clauses if isinstance(clauses, list) else [clauses])]

    must, filters, should, must_not = each("must"), each("filter"), each("should"), each("must_not")
    if not all(m for m, _ in must + filters) or any(m for m, _ in must_not):
        return False, 0.0
    needed = int(spec.get("minimum_should_match", 0 if must or filters else 1 if should else 0))
    if sum(1 for m, _ in should if m) < needed:
        return False, 0.0
    return True, sum(s for _, s in must) + sum(s for m, s in should if m) or 1.0


def _sort_keys(sort: Any) -> list[tuple[str, bool]]:
    keys: list[tuple[str, bool]] = []
    for entry in sort if isinstance(sort, list) else [sort]:
        if isinstance(entry, str):
            keys.append((entry, entry == "_score"))
        else:
            ((name, order),) = entry.items()
            order = order["order"] if isinstance(order, dict) else order
            keys.append((name, order == "desc"))
    return keys


_Scored = tuple[float, tuple[int, int], str, str, JSON]


def _sort_value(scored: _Scored, name: str) -> Any:
    score, position, _, _, source = scored
    if name == "_score":
        return score
    if name == "_doc":
        return position[1]
    return _field(source, name)


def _sort_key(scored: _Scored, name: str) -> tuple[bool, Any]:
    value = _sort_value(scored, name)
    return value is not None, value if value is not None else 0


def _filtered(source: JSON, spec: Any) -> JSON:
    if spec is None or spec is True:
        return source
    includes = spec if isinstance(spec, list | str) else spec.get("includes", spec.get("include", []))
    excludes = [] if isinstance(spec, list | str) else spec.get("excludes", spec.get("exclude", []))
    includes, excludes = _values(includes), _values(excludes)
    return {
        k: v
        for k, v in source.items()
        if (not includes or any(fnmatch.fnmatchcase(k, p) for p in includes))
        and not any(fnmatch.fnmatchcase(k, p) for p in excludes)
    }
