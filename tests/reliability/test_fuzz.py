"""A seeded fuzz of answerbox's own endpoints: 1,200 malformed and hostile requests (mutated
search bodies, pipeline definitions, hostile templates, NDJSON, headers, sizes and paths, bodies
dear to parse: many lines, many values, huge questions; compressed bodies whole, cut off and
bombs; the parameters opensearch-py takes as its own), over real HTTP against
osmem-server. No 5xx at all, no request answered in over 2 s, every 4xx in OpenSearch's error
shape, the server's memory bounded, and afterwards the index's documents and the stored
pipelines are as they were."""

from __future__ import annotations

import gzip
import json
import random
import resource
import time
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index

REQUESTS = 1200
SEED = 20261123
DOCS = [
    {"_id": str(i), "body": text}
    for i, text in enumerate(["Spice is mined on Arrakis.", "Sand worms.", "Emma, a novel."])
]
STORED = {
    "expand": {"request_processors": [{"llm_query_expansion": {"timeout_s": 2}}]},
    "answers": {
        "response_processors": [
            {"retrieval_evaluator": {"corrective": None, "top_n": 2}},
            {"cited_answer": {"size": 2}},
        ]
    },
}
PROCESSORS = [
    "llm_query_expansion",
    "retrieval_evaluator",
    "chain_of_query",
    "cited_answer",
    "filter_query",
    "nope",
    "",
]
KEYS = [
    "query",
    "size",
    "from",
    "search_pipeline",
    "ext",
    "_source",
    "post_filter",
    "aggs",
    "highlight",
    "timeout",
    "sort",
]
# Hostile templates: each must be refused before it makes anything big (prompts/sandbox.py).
TEMPLATES = [
    "{{ 'x' * 10**9 }}", "{% for %}", "{{ 2 ** 10**6 }}", "{{ ((((10**64)**64)**64)**64) > 0 }}",
    "{{ '%3000000d' % 1 }}", "{{ 'a'.ljust(600000000) }}", "{{ 'a'.zfill(10**9) }}", "{{ query|center(10**9) }}",
    "{{ '{:>999999999}'.format(1) }}", "{% include 'x' %}", "{{ 1/0 }}", "{{ range(10**7)|list }}",
    "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
    "{% set s = 'x' * 150000 %}{{ s.replace('', s) }}", "{% set l = ['x' * 100000] * 100000 %}{{ l }}",
]  # fmt: skip
QA_KEYS = ["llm_question", "llm_model", "context_size", "timeout", "system_prompt", "user_instructions", "memory_id"]


def _value(rng: random.Random, depth: int = 0) -> Any:
    """Any JSON value, weighted toward the awkward: wrong types, edges, deep nesting, long text."""
    kinds = ["int", "float", "str", "bool", "null", "list", "dict", "deep", "long", "huge"]
    kind = rng.choice(kinds if depth < 3 else kinds[:5])
    if kind == "int":
        return rng.choice([0, -1, 1, 2**31, -(2**63), 10**30])
    if kind == "float":
        return rng.choice([0.5, -1e308, 1e-308, 3.14])
    if kind == "str":
        return rng.choice(["", " ", "_none", "*", "../x", "\u0000", "{{ 7*7 }}", "é" * 3, "a,b", "[1]", "<script>"])
    if kind in ("bool", "null"):
        return rng.choice([True, False, None])
    if kind == "list":
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    if kind == "dict":
        return {rng.choice(KEYS + QA_KEYS + PROCESSORS): _value(rng, depth + 1) for _ in range(rng.randint(0, 3))}
    if kind == "deep":
        nested: Any = 1
        for _ in range(rng.choice([50, 150, 400])):
            nested = [nested] if rng.random() < 0.5 else {"bool": {"must": nested}}
        return nested
    if kind == "long":
        return "word " * rng.choice([1000, 20000])
    return rng.choice(["9" * 5000, "." * 30000])


def _search_body(rng: random.Random) -> dict[str, Any]:
    body: dict[str, Any] = {"query": {"match": {"body": "spice"}}}
    for _ in range(rng.randint(1, 3)):
        key = rng.choice(KEYS)
        if key == "search_pipeline":
            body[key] = rng.choice([rng.choice(list(STORED)), "missing", _pipeline(rng), _value(rng)])
        elif key == "ext":
            body[key] = (
                {"generative_qa_parameters": {rng.choice(QA_KEYS): _value(rng)}} if rng.random() < 0.7 else _value(rng)
            )
        else:
            body[key] = _value(rng)
    return body


def _pipeline(rng: random.Random) -> Any:
    """A definition that is always wrong somewhere (so nothing fuzzed is ever stored)."""
    phase = rng.choice(["request_processors", "response_processors", "phase_results_processors", "bogus"])
    entry = {
        rng.choice(PROCESSORS): {
            rng.choice(["top_n", "max_tokens", "prompt", "examples_file", "size", "tag"]): _value(rng)
        }
    }
    broken = rng.choice([
        {phase: [entry, {"a": {}, "b": {}}]},
        {phase: [entry], "bogus_key": 1},
        {phase: _value(rng)},
        {phase: [{"llm_query_expansion": {"prompt": rng.choice(TEMPLATES)}}]},
        {phase: [{"cited_answer": {"max_tokens": rng.choice([0, 10**6, "many"])}}]},
        _value(rng) if rng.random() < 0.5 else [entry],
    ])  # fmt: skip
    return broken


def _templated(rng: random.Random) -> dict[str, Any]:
    return {"request_processors": [{"llm_query_expansion": {"prompt": rng.choice(TEMPLATES)}}]}


def _raw(rng: random.Random, payload: Any) -> bytes:
    text = json.dumps(payload)
    mutation = rng.random()
    if mutation < 0.7:
        return text.encode()
    if mutation < 0.8:
        return text[: rng.randint(0, len(text))].encode()  # truncated
    if mutation < 0.9:
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    if mutation < 0.95:
        depth = rng.choice([1_000, 100_000])
        return ('{"query":' * depth + "1" + "}" * depth).encode()  # deeper than any parser's stack
    return text.replace('"', "'", 1).encode()


def _ndjson(rng: random.Random) -> bytes:
    lines: list[bytes] = []
    for _ in range(rng.randint(1, 4)):
        header = rng.choice(
            [{}, {"index": "books"}, {"index": ["books", "other"]}, {"search_pipeline": "answers"}, _value(rng)]
        )
        lines += [_raw(rng, header), _raw(rng, _search_body(rng))]
    if rng.random() < 0.2:
        lines.pop()
    return b"\n".join(lines) + rng.choice([b"\n", b"", b"\n\n"])


Request = tuple[str, str, bytes | None, dict[str, str]]


def _dear_to_parse(rng: random.Random) -> Request:
    """Cheap to send, dear to read: empty-object lines past the _msearch limit, a search of empty
    objects (under the values limit, over it, with and without a pipeline), a huge question."""
    count = rng.choice([1_000, 30_000, 300_000])
    path = rng.choice(["/books/_search", "/books/_search?search_pipeline=answers"])
    objects = b'{"query": {"bool": {"should": [' + b",".join([b"{}"] * count) + b"]}}}"
    question = b'{"query": {"match": {"body": "' + b"spice " * count + b'"}}}'
    ndjson = {"content-type": "application/x-ndjson"}
    return rng.choice([
        ("POST", "/books/_msearch", b"{}\n" * count * 2, ndjson),
        ("POST", path, objects, {}),
        ("POST", "/books/_search?search_pipeline=answers", question, {}),
        ("POST", "/books/_msearch", b'{"search_pipeline": "answers"}\n' + question + b"\n", ndjson),
    ])  # fmt: skip


def _compressed(rng: random.Random, body: bytes) -> Request:
    """A pipeline search sent compressed: whole, cut off, followed by more, a bomb past the size
    limit once inflated, or not what its encoding says."""
    packed = rng.choice([
        gzip.compress(body), zlib.compress(body), gzip.compress(body)[:-9], gzip.compress(body) * 2, BOMB, body,
    ])  # fmt: skip
    encoding = rng.choice(["gzip", "deflate", "x-gzip", "br", "gzip, deflate", "identity"])
    return "POST", "/books/_search?search_pipeline=answers", packed, {"content-encoding": encoding}


# 12 MiB of spaces in 12 KB: past limits.max_request_bytes once inflated.
BOMB = gzip.compress(b" " * (12 * 1024 * 1024))
# What opensearch-py would take as its own (timeout, ignore, request_timeout), and format.
CLIENT_PARAMS = ["timeout=1ms", "timeout=x", "ignore=404", "request_timeout=0", "format=yaml", "format=cbor"]

HEADERS: list[dict[str, str]] = [
    {"connection": "keep-alive, x-secret", "x-secret": "1"},
    {"x-proxy-user": "admin", "x-proxy-roles": "all_access", "x-forwarded-for": "10.0.0.1"},
    {"x-opaque-id": "y" * 8000},
    {"content-type": "text/plain"},
    {"cookie": "a=" + "b" * 4000},
]


def _requests(rng: random.Random) -> Iterator[Request]:
    ids = ["answers", "expand", "new", "_none", "%2E%2E", "a%00b", "x" * 300, "%F0%9F%92%A5", "*", "a,b"]
    content_types = ["application/json", "application/json; charset=utf-8", "text/plain", "application/x-ndjson", ""]
    makers: list[Callable[[], Request]] = [
        lambda: ("POST", rng.choice(["/books/_search", "/_search", "/books,missing/_search"]),
                 _raw(rng, _search_body(rng)), {}),
        lambda: ("GET", "/books/_search?search_pipeline=" + rng.choice(["answers", "expand", "%00", "*", "missing"]),
                 None, {}),
        lambda: ("POST", rng.choice(["/_msearch", "/books/_msearch"]), _ndjson(rng),
                 {"content-type": "application/x-ndjson"}),
        lambda: ("PUT", f"/_search/pipeline/{rng.choice(ids)}", _raw(rng, _pipeline(rng)), {}),
        lambda: ("GET", f"/_search/pipeline/{rng.choice(ids)}", None, {}),
        lambda: ("DELETE", f"/_search/pipeline/{rng.choice(ids[3:])}", None, {}),
        lambda: ("POST", "/books/_answerbox/stream", _raw(rng, _search_body(rng)), {}),
        lambda: ("POST", f"/books/_answerbox/stream?search_pipeline={rng.choice(['answers', 'expand', 'x'])}",
                 _raw(rng, _search_body(rng)), {}),
        lambda: ("GET", rng.choice(["/_answerbox/stats/search_pipeline", "/metrics", "/_answerbox/stats/%00"]),
                 None, {}),
        # A stored pipeline's hostile template (refused), and searches asking for too much.
        lambda: ("PUT", "/_search/pipeline/hostile", json.dumps(_templated(rng)).encode(), {}),
        lambda: ("POST", "/books/_search?search_pipeline=answers",
                 json.dumps({**_search_body(rng), "size": rng.choice([10**4, 10**9, -1, "x"])}).encode(), {}),
        lambda: ("POST", "/books/_search?search_pipeline=answers",
                 b'{"query": {"match": {"body": "' + b"spice " * rng.choice([10, 20_000]) + b'"}}}', {}),
        lambda: _dear_to_parse(rng),
        lambda: _compressed(rng, _raw(rng, _search_body(rng))),
        lambda: ("POST", f"/books/_search?search_pipeline=answers&{rng.choice(CLIENT_PARAMS)}",
                 _raw(rng, _search_body(rng)), {}),
    ]  # fmt: skip
    for _ in range(REQUESTS):
        method, path, body, headers = rng.choice(makers)()
        headers = dict(headers)
        if "content-type" not in headers and body is not None:
            headers["content-type"] = rng.choice(content_types)
        if rng.random() < 0.1:
            headers["authorization"] = rng.choice(["Basic !!!", "Bearer " + "x" * 5000, "Basic " + "QQ==" * 3])
        if rng.random() < 0.1:
            headers.update(rng.choice(HEADERS))
        yield method, path, body, headers


def _max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _shaped(response: httpx.Response) -> bool:
    error = response.json()
    if response.request.method == "GET" and "/_search/pipeline/" in response.request.url.path and error == {}:
        return response.status_code == 404  # OpenSearch answers a missing pipeline with {}
    if isinstance(error, dict) and isinstance(error.get("error"), str):
        # OpenSearch's own short forms, passed through: "no handler found" (no status field)
        # and an unsupported Content-Type.
        return bool(error.get("status", response.status_code) == response.status_code)
    return (
        isinstance(error, dict)
        and error.get("status") == response.status_code
        and isinstance(error.get("error"), dict)
        and {"type", "reason", "root_cause"} <= error["error"].keys()
        and all({"type", "reason"} <= cause.keys() for cause in error["error"]["root_cause"])
    )


@pytest.fixture
def target(make_answerbox: AnswerboxFactory, opensearch: OpenSearch, client: httpx.Client) -> tuple[str, Any]:
    bulk_index(opensearch, "books", [dict(d) for d in DOCS], {"properties": {"body": {"type": "text"}}})
    url = make_answerbox(limits={"processor_timeout_s": 10, "pipeline_budget_s": 10})
    for pipeline_id, definition in STORED.items():
        assert client.put(f"{url}/_search/pipeline/{pipeline_id}", json=definition).status_code == 200
    return url, opensearch


def test_fuzzed_requests_get_no_5xx_and_change_nothing(target: tuple[str, Any], client: httpx.Client) -> None:
    url, opensearch = target
    documents = opensearch.search(index="books", body={"query": {"match_all": {}}, "sort": ["_doc"]})["hits"]["hits"]
    problems: list[str] = []
    statuses: dict[int, int] = {}
    slowest = 0.0
    rss_before = _max_rss_mb()
    for method, path, body, headers in _requests(random.Random(SEED)):
        started = time.perf_counter()
        response = client.request(method, httpx.URL(f"{url}{path}"), content=body, headers=headers)
        took = time.perf_counter() - started
        slowest = max(slowest, took)
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        shown = f"{method} {path[:80]} {(body or b'')[:120]!r} -> {response.status_code} {response.text[:300]}"
        if took > 2:
            problems.append(f"took {took:.1f}s: {shown}")
        if response.status_code >= 500:
            problems.append(shown)
        elif 400 <= response.status_code < 500 and response.headers.get("content-type", "").startswith(
            "application/json"
        ):
            if not _shaped(response):
                problems.append("unshaped " + shown)
        elif 400 <= response.status_code < 500 and method != "HEAD":
            problems.append("not JSON " + shown)
    assert not problems, f"{len(problems)} of {REQUESTS}:\n" + "\n".join(problems[:20])
    # answerbox runs in this process: its peak memory grew by no more than a few hostile bodies.
    grown = _max_rss_mb() - rss_before
    print(
        f"fuzz: {REQUESTS} requests, statuses {dict(sorted(statuses.items()))}, slowest {slowest:.2f}s, peak "
        f"RSS +{grown:.0f} MB"
    )
    assert grown < 300, grown
    assert sum(statuses.get(s, 0) for s in range(400, 500)) > REQUESTS // 3, statuses  # the fuzz reached the checks
    after = opensearch.search(index="books", body={"query": {"match_all": {}}, "sort": ["_doc"]})["hits"]["hits"]
    assert after == documents
    assert client.get(f"{url}/_search/pipeline").json() == STORED
