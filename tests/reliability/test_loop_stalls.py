"""Bodies that are cheap to send and were dear to read, each sent while a poller asks a cheap
endpoint every 20 ms: no poll waits more than 200 ms, so the event loop was never held that
long, and the body is answered (or refused) within a couple of seconds. Parsed on the loop,
2 M empty objects held it for seconds (6 MB of ``{}`` lines, up to 9). What answerbox refuses
itself, it refuses within a second; what is OpenSearch's, it passes on untouched, unparsed.

answerbox runs in its own process, as in test_load.py: in the test's, it would share one
interpreter lock with the poller, and the poller would time the test, not the server."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from osmem_server import OsmemServer

from tests.support.lag import frozen_heap
from tests.support.servers import serve_answerbox_process
from tests.unit.asgi import opensearch_error

STALL_MS = 200
REFUSED_S = 1.0
OBJECTS = 2_000_000
EMPTY_OBJECTS = b",".join([b"{}"] * OBJECTS)
MANY_OBJECTS = b'{"query": {"bool": {"should": [' + EMPTY_OBJECTS + b"]}}}"
NDJSON = "application/x-ndjson"
PIPELINE = {"response_processors": [{"retrieval_evaluator": {"corrective": None}}, {"cited_answer": {"size": 1}}]}
# path, body, content type, the status expected (None: OpenSearch's to answer, never a 5xx).
BODIES = {
    "msearch of empty-object lines": ("/books/_msearch", b"{}\n" * OBJECTS, NDJSON, 400),
    "msearch of one line of empty objects": ("/books/_msearch", b"{}\n" + MANY_OBJECTS + b"\n", NDJSON, None),
    "search of empty objects naming a pipeline": (
        "/books/_search?search_pipeline=answers",
        MANY_OBJECTS,
        "application/json",
        None,
    ),
    "search of empty objects in its own pipeline": (
        "/books/_search",
        b'{"search_pipeline": {"response_processors": [' + EMPTY_OBJECTS + b"]}}",
        "application/json",
        None,
    ),
}


def _matching(question: str) -> dict[str, Any]:
    return {"query": {"match": {"body": question}}}


@pytest.fixture(scope="module")
def url(osmem_server: OsmemServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    cluster = osmem_server.clone()
    try:
        settings = {"opensearch": {"url": cluster.url}}
        doc = httpx.put(f"{cluster.url}/books/_doc/dune?refresh=true", json={"body": "Spice is mined on Arrakis."})
        assert doc.status_code in (200, 201), doc.text
        with serve_answerbox_process(settings, Path(tmp_path_factory.mktemp("answerbox"))) as url:
            assert httpx.put(f"{url}/_search/pipeline/answers", json=PIPELINE).status_code == 200
            # The models load now, not in a test.
            warm = httpx.post(f"{url}/books/_search?search_pipeline=answers", json=_matching("spice"), timeout=60)
            assert warm.status_code == 200, warm.text
            yield url
    finally:
        cluster.close()


async def _poll(http: httpx.AsyncClient, url: str, stop: asyncio.Event) -> list[float]:
    times: list[float] = []
    while not stop.is_set():
        started = time.perf_counter()
        assert (await http.get(f"{url}/_answerbox/stats/search_pipeline")).status_code == 200
        times.append((time.perf_counter() - started) * 1000)
        await asyncio.sleep(0.02)
    return times


async def _sent_while_polled(
    url: str, path: str, body: bytes, content_type: str
) -> tuple[httpx.Response, float, list[float]]:
    # The poller runs in the test process: its collector's passes over the suite's heap are not the server's stalls.
    with frozen_heap():
        async with httpx.AsyncClient(timeout=60) as poller, httpx.AsyncClient(timeout=60) as sender:
            stop = asyncio.Event()
            polls = asyncio.create_task(_poll(poller, url, stop))
            await asyncio.sleep(0.1)
            started = time.perf_counter()
            response = await sender.post(f"{url}{path}", content=body, headers={"content-type": content_type})
            took = time.perf_counter() - started
            await asyncio.sleep(0.2)
            stop.set()
            return response, took, await polls


@pytest.mark.parametrize("name", list(BODIES))
def test_a_body_dear_to_parse_does_not_hold_the_event_loop(url: str, name: str) -> None:
    path, body, content_type, status = BODIES[name]
    response, took, polls = asyncio.run(_sent_while_polled(url, path, body, content_type))
    print(f"{name}: {response.status_code} in {took:.2f}s, slowest poll {max(polls):.0f} ms of {len(polls)}")
    if status is None:
        assert response.status_code < 500, response.text[:300]
    else:
        assert response.status_code == status, response.text[:300]
        assert took < REFUSED_S
    assert max(polls) < STALL_MS, sorted(polls)[-5:]


def test_a_huge_question_is_refused_before_any_processor_reads_it(url: str, client: httpx.Client) -> None:
    """The reader and the evaluator took 10 s over a 1.3 MB question, 2 s of it on the loop, and
    the encoder's cache kept it: the question of a pipeline search is capped, in _search, in each
    line of an _msearch and in a stream (limits.max_question_chars, 4,000 by default)."""
    huge = json.dumps(_matching("Where is the spice mined? " * 50_000)).encode()
    response, took, polls = asyncio.run(
        _sent_while_polled(url, "/books/_search?search_pipeline=answers", huge, "application/json")
    )
    reason = opensearch_error(response, 400, "illegal_argument_exception")
    assert reason == "the search's question is 1300000 characters long, above limits.max_question_chars (4000)"
    assert took < REFUSED_S
    assert max(polls) < STALL_MS, sorted(polls)[-5:]
    lines = [{"search_pipeline": "answers"}, _matching("spice " * 1000), {}, _matching("spice")]
    ndjson = "".join(json.dumps(line) + "\n" for line in lines)
    answered = client.post(f"{url}/books/_msearch", content=ndjson, headers={"content-type": NDJSON})
    refused, passed = answered.json()["responses"]
    assert refused["status"] == 400
    assert "limits.max_question_chars" in refused["error"]["reason"]
    assert passed["hits"]["hits"]
    streamed = client.post(f"{url}/books/_answerbox/stream?search_pipeline=answers", content=huge,
                           headers={"content-type": "application/json"})  # fmt: skip
    assert "limits.max_question_chars" in opensearch_error(streamed, 400, "illegal_argument_exception")


# A caller's ``*`` wildcards, matched against every key of the answer (filter_path) or every
# alias name (a processor's search of another index): as ``.*`` each, 28 of them and a letter
# that never matches held the whole server for 3 s, 30 for 7.6 s.
STARS = "*" * 28 + "Z"
SEARCH = {"query": {"match": {"body": "spice"}}, "search_pipeline": PIPELINE}


def test_a_filter_path_of_many_wildcards_does_not_hold_the_event_loop(url: str) -> None:
    body = json.dumps(SEARCH).encode()
    response, took, polls = asyncio.run(
        _sent_while_polled(url, f"/books/_search?filter_path={STARS}", body, "application/json")
    )
    assert response.status_code == 200, response.text[:300]
    assert response.json() == {}  # the run of stars is one: nothing ends in Z
    assert max(polls) < STALL_MS, sorted(polls)[-5:]
    many = "*a" * 30 + "Z"  # thirty that are not one run: refused, not run
    response, took, polls = asyncio.run(
        _sent_while_polled(url, f"/books/_search?filter_path=hits.{many}", body, "application/json")
    )
    assert "more than 16 [*] wildcards" in opensearch_error(response, 400, "illegal_argument_exception")
    assert took < REFUSED_S
    assert max(polls) < STALL_MS, sorted(polls)[-5:]


def test_a_target_of_many_wildcards_beside_a_filtered_alias_does_not_hold_the_event_loop(url: str) -> None:
    """The corrective search goes to another index only once no alias of the caller's target
    that binds a search (a filter) is named by it: each part of the target is matched against
    each such alias's name."""
    actions = [{"add": {"index": "books", "alias": "books_public", "filter": {"match_all": {}}}}]
    assert httpx.post(f"{url}/_aliases", json={"actions": actions}).status_code == 200
    corrective = {"text_fields": ["body"], "upper": 1.0, "lower": -1.0, "corrective": {"index": "books"}}
    body = {"query": {"match": {"body": "spice"}}, "search_pipeline": {
        "response_processors": [{"retrieval_evaluator": corrective}]}}  # fmt: skip
    for target, refused in ((f"{STARS},books", False), ("*a" * 30 + "Z,books", True)):
        response, _, polls = asyncio.run(
            _sent_while_polled(url, f"/{target}/_search", json.dumps(body).encode(), "application/json")
        )
        assert response.status_code == 200, response.text[:300]
        assert response.json()["hits"]["hits"], response.text[:300]
        warned = any("books_public" in w for w in response.json()["ext"]["answerbox"]["warnings"])
        # Past 16 wildcards the part is taken as naming every alias: the search is refused, never widened.
        assert warned is refused, response.json()["ext"]["answerbox"]["warnings"]
        assert max(polls) < STALL_MS, sorted(polls)[-5:]


def test_a_highlight_of_a_whole_huge_field_is_clipped_to_the_snippet(url: str) -> None:
    """The caller writes the highlight: ``number_of_fragments: 0`` makes the whole field one
    fragment, and a 4 MB document's became a block of 4 MB (a 1 s stall). It is clipped to
    ``snippet_chars``, as a block without a highlight is."""
    huge = "Spice is mined on Arrakis by the Fremen. " + "The sand is deep and the worms are long. " * 100_000
    assert httpx.put(f"{url}/books/_doc/huge?refresh=true", json={"body": huge}).status_code in (200, 201)
    try:
        body = {
            "query": {"match": {"body": "spice mined"}},
            "ext": {"generative_qa_parameters": {"llm_question": "Who mines spice on Arrakis?"}},
            "highlight": {"fields": {"body": {"number_of_fragments": 0}}},
            "search_pipeline": {
                "response_processors": [{"cited_answer": {"size": 2, "snippet_chars": 500, "fields": {"text": "body"}}}]
            },
        }
        response, _, polls = asyncio.run(
            _sent_while_polled(url, "/books/_search", json.dumps(body).encode(), "application/json")
        )
        assert response.status_code == 200, response.text[:300]
        hits = response.json()["hits"]["hits"]
        assert "huge" in [hit["_id"] for hit in hits]
        assert max(polls) < STALL_MS, sorted(polls)[-5:]
        answer = response.json()["ext"]["answerbox"]["answer"]
        cited = [c for c in (answer["candidate"] or answer)["citations"] if c["_id"] == "huge"]
        assert cited, answer
        assert all(c["end"] - c["start"] <= 500 and len(c["quote"]) <= 500 for c in cited)
    finally:
        httpx.delete(f"{url}/books/_doc/huge?refresh=true")
