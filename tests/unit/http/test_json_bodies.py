"""How answerbox reads a JSON body without holding the event loop: too many values refused from a
scan before any parsing, large bodies parsed in a worker thread that gives the loop its turns,
and an _msearch's searches counted before a line is parsed. Over real HTTP, with a poller:
tests/reliability/test_loop_stalls.py."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from answerbox.core.errors import ParseError
from answerbox.http import search
from answerbox.http.bodies import MAX_JSON_VALUES, json_or_none, may_name_pipeline, parse_json, parsed

from tests.unit.asgi import in_process, opensearch_error
from tests.unit.fake_opensearch import FakeOpenSearch

EMPTY_OBJECTS = b"[" + b",".join([b"{}"] * (MAX_JSON_VALUES + 1)) + b"]"


def test_more_values_than_the_limit_are_refused_unparsed(monkeypatch: pytest.MonkeyPatch) -> None:
    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("parsed")

    monkeypatch.setattr(json, "loads", never)
    with pytest.raises(ParseError) as refused:
        parse_json(EMPTY_OBJECTS)
    assert refused.value.reason == f"request body is too large to parse: more than {MAX_JSON_VALUES} values"
    assert json_or_none(EMPTY_OBJECTS) is None  # a search body: OpenSearch's to answer, untouched


def test_a_large_body_parses_as_json_loads_would() -> None:
    value: Any = {
        "ints": [0, -1, 2**63, int("9" * 4000)],
        "floats": [0.5, -1e308, 1e-308, 3.0],
        "nested": [{"a": {"b": [None, True, False, "é\u0000"]}}] * 100,
        "text": "x" * 70_000,
    }
    raw = json.dumps(value).encode()
    assert len(raw) > 64 * 1024  # past the size parsed on the loop
    assert parse_json(raw) == value
    assert [type(n) for n in parse_json(raw)["floats"]] == [float] * 4
    assert parse_json(b'{"a": 1, "a": 2, "pad": "' + b" " * 70_000 + b'"}')["a"] == 2  # the last of a key wins


async def test_a_large_body_is_parsed_off_the_loop_which_keeps_its_turns() -> None:
    """json's C parser holds the interpreter lock: 10 MB of long integers held the loop 0.2 s."""
    raw = b"[" + b",".join([b"9" * 4000] * 2500) + b"]"
    gaps: list[float] = []
    done = False

    async def ticks() -> None:
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    ticker = asyncio.create_task(ticks())
    value: list[int] = await parsed(raw)
    done = True
    await ticker
    assert len(value) == 2500
    assert max(gaps) < 0.1, max(gaps)


async def test_msearch_searches_are_counted_before_a_line_is_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    def never(raw: bytes) -> None:
        raise AssertionError("parsed")

    monkeypatch.setattr(search, "json_or_none", never)
    async with in_process(limits={"max_msearch_searches": 2}) as client:
        for lines in (5, 1_000_000):
            response = await client.post(
                "/books/_msearch", content=b"{}\n" * lines, headers={"content-type": "application/x-ndjson"}
            )
            reason = opensearch_error(response, 400, "illegal_argument_exception")
            assert reason == f"_msearch holds {(lines + 1) // 2} searches, above limits.max_msearch_searches (2)"


@pytest.mark.parametrize("path", ["/books/_search", "/books/_msearch"])
async def test_a_search_of_too_many_values_is_opensearchs(path: str) -> None:
    """Unparsed, it runs no pipeline here: it goes on untouched, by the passthrough (which finds
    OpenSearch unreachable), and answerbox's own client sends nothing."""
    cluster = FakeOpenSearch()
    cluster.index_docs("books", [{"_id": "dune", "body": "Spice is mined on Arrakis."}])
    body = b'{"search_pipeline": {"response_processors": []}, "x": ' + EMPTY_OBJECTS + b"}"
    if path.endswith("_msearch"):
        body = b"{}\n" + body + b"\n"
    async with in_process(cluster=cluster) as client:
        response = await client.post(path, content=body, headers={"content-type": "application/x-ndjson"})
    assert opensearch_error(response, 502, "connect_exception") == "OpenSearch is unreachable"
    assert cluster.sent("/books/*") == []


async def test_a_search_no_pipeline_can_apply_to_goes_on_unparsed(monkeypatch: pytest.MonkeyPatch) -> None:
    """No pipeline named, none by default: the body is OpenSearch's alone, and answerbox never parses
    it (the passthrough finds OpenSearch unreachable)."""

    def never(raw: bytes) -> None:
        raise AssertionError("parsed")

    monkeypatch.setattr(search, "json_or_none", never)
    cluster = FakeOpenSearch()
    cluster.index_docs("books", [{"_id": "dune", "body": "Spice is mined on Arrakis."}])
    async with in_process(cluster=cluster) as client:
        response = await client.post("/books/_search", json={"query": {"match": {"body": "spice"}}})
    assert opensearch_error(response, 502, "connect_exception") == "OpenSearch is unreachable"


@pytest.mark.parametrize(
    ("raw", "may"),
    [
        (b'{"query": {"match_all": {}}}', False),
        (b'{"query": {"match": {"body": "spice"}}, "size": 3}', False),
        (b'{"search_pipeline": "p"}', True),
        # json.loads reads each as {"search_pipeline": "p"}, and so does OpenSearch.
        (b'{"search\\u005fpipeline": "p"}', True),
        ('{"search_pipeline": "p"}'.encode("utf-16"), True),
        ('{"search_pipeline": "p"}'.encode("utf-32-le"), True),
    ],
    ids=["match_all", "match", "named", "escaped", "utf-16", "utf-32"],
)
def test_a_body_may_name_a_pipeline_in_any_spelling_json_reads(raw: bytes, may: bool) -> None:
    assert may_name_pipeline(raw) is may
    if may:
        assert json.loads(raw) == {"search_pipeline": "p"}


async def test_an_msearch_no_pipeline_can_apply_to_goes_on_with_its_bodies_unparsed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its header lines are read for their targets (an index's default may apply); its search
    bodies, the bulk of it, are not."""
    read: list[bytes] = []

    def recorded(raw: bytes) -> Any:
        read.append(raw)
        return json_or_none(raw)

    monkeypatch.setattr(search, "json_or_none", recorded)
    cluster = FakeOpenSearch()
    cluster.index_docs("books", [{"_id": "dune", "body": "Spice is mined on Arrakis."}])
    lines = [b'{"index": "books"}', b'{"query": {"match": {"body": "spice"}}}', b"{}", b'{"size": 0}']
    async with in_process(cluster=cluster) as client:
        response = await client.post(
            "/_msearch", content=b"\n".join(lines) + b"\n", headers={"content-type": "application/x-ndjson"}
        )
    assert opensearch_error(response, 502, "connect_exception") == "OpenSearch is unreachable"
    assert read == [lines[0], lines[2]]
