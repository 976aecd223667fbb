"""The caller's ``X-Opaque-Id`` comes back on every answer, once, as OpenSearch echoes it, and
goes on with answerbox's own searches (osmem-server does not echo it: answerbox does)."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
from opensearchpy import OpenSearch
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.conftest import AnswerboxFactory, RecordedFactory, bulk_index
from tests.support.forwarding import forward
from tests.support.servers import serve

INLINE = {"search_pipeline": {"request_processors": []}, "query": {"match_all": {}}}
NDJSON = {"content-type": "application/x-ndjson"}


def _answers(client: httpx.Client, url: str, headers: dict[str, str]) -> dict[str, httpx.Response]:
    msearch = "".join(json.dumps(line) + "\n" for line in [{}, INLINE, {}, {"query": {"match_all": {}}}])
    return {
        "passthrough": client.get(f"{url}/books/_count", headers=headers),
        "passthrough's error": client.get(f"{url}/missing/_doc/1", headers=headers),
        "plain search": client.post(f"{url}/books/_search", headers=headers),
        "a pipeline's": client.post(f"{url}/books/_search", json=INLINE, headers=headers),
        "a pipeline's msearch": client.post(f"{url}/books/_msearch", content=msearch, headers={**headers, **NDJSON}),
        "answerbox's error": client.post(f"{url}/books/_search", json={"search_pipeline": 7}, headers=headers),
        "answerbox's API": client.get(f"{url}/_search/pipeline", headers=headers),
    }


def test_every_answer_echoes_the_caller_s_opaque_id_once(
    answerbox: str, client: httpx.Client, opensearch: OpenSearch
) -> None:
    bulk_index(opensearch, "books", [{"title": "Dune"}])
    answers = _answers(client, answerbox, {"X-Opaque-Id": "dashboard-42"})
    assert answers["answerbox's error"].status_code == 400
    assert answers["a pipeline's msearch"].status_code == 200
    for kind, answer in answers.items():
        assert answer.headers.get_list("x-opaque-id") == ["dashboard-42"], kind


def test_an_answer_to_a_request_without_one_has_none(
    answerbox: str, client: httpx.Client, opensearch: OpenSearch
) -> None:
    bulk_index(opensearch, "books", [{"title": "Dune"}])
    for kind, answer in _answers(client, answerbox, {}).items():
        assert "x-opaque-id" not in answer.headers, kind


def _echoing(upstream: str) -> Callable[[Request], object]:
    """A hop that echoes the header, as OpenSearch does."""

    async def echo(request: Request) -> Response:
        answer = await forward(upstream, request, await request.body(), 5.0)
        answer.headers["X-Opaque-Id"] = request.headers.get("x-opaque-id", "")
        return answer

    return echo


def test_an_opensearch_that_echoes_it_is_not_echoed_twice(
    make_answerbox: AnswerboxFactory, osmem_url: str, client: httpx.Client
) -> None:
    app = Starlette(routes=[Route("/{path:path}", _echoing(osmem_url), methods=["GET", "POST"])])
    with serve(app) as hop:
        url = make_answerbox(opensearch={"url": hop})
        answer = client.get(f"{url}/_cat/indices", headers={"X-Opaque-Id": "r-1"})
    assert answer.headers.get_list("x-opaque-id") == ["r-1"]


def test_a_pipeline_s_own_search_carries_it_to_opensearch(
    recorded_answerbox: RecordedFactory, client: httpx.Client
) -> None:
    recorder, url = recorded_answerbox()
    client.post(f"{url}/_search", json=INLINE, headers={"X-Opaque-Id": "r-2"}).raise_for_status()
    searches = [r for r in recorder.requests if r.path == "/_search"]  # not answerbox's own store's
    assert searches
    assert all(r.headers.get("x-opaque-id") == "r-2" for r in searches)
