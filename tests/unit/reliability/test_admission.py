"""Load is admitted, not absorbed: past the run limit a search is refused at once with
OpenSearch's 429, a caller who floods is refused before the others, the LLM's slots and one
request's LLM calls are bounded, and a waiting LLM call degrades instead of queueing.

In-process against the fake cluster; the scripted LLM holds every call until the test lets
it answer, so which searches are running at once is decided by the test, not by timing."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from typing import Any

import httpx
import pytest
from answerbox.core.config import Limits
from answerbox.core.errors import RejectedExecution
from answerbox.identities import Identities
from answerbox.opensearch import Caller
from answerbox.pipeline.limits.admission import Admission, caller_key
from starlette.requests import Request
from starlette.responses import Response

from tests.support.scripted_llm import ScriptedLLM
from tests.unit.asgi import in_process, opensearch_error
from tests.unit.fake_opensearch import FakeOpenSearch, basic

EXPAND = {"request_processors": [{"llm_query_expansion": {"timeout_s": 5}}]}
BODY = {"query": {"match": {"body": "spice"}}}
NDJSON = {"content-type": "application/x-ndjson"}
# Slots for every call the tests hold: the runs' admission is what they test.
ROOMY_LLM = {"max_concurrent": 8, "max_concurrent_per_caller": 8}


class HeldLLM(ScriptedLLM):
    """Answers a call only once ``release`` is set; ``held`` counts the calls waiting for it."""

    def __init__(self) -> None:
        super().__init__(replies=["spice melange arrakis"])
        self.release = asyncio.Event()
        self.held = 0
        self._arrival = asyncio.Condition()

    async def _chat(self, request: Request) -> Response:
        async with self._arrival:
            self.held += 1
            self._arrival.notify_all()
        await self.release.wait()
        return await super()._chat(request)

    async def until_held(self, calls: int) -> None:
        async with self._arrival:
            await asyncio.wait_for(self._arrival.wait_for(lambda: self.held >= calls), 5)


@pytest.fixture
def cluster() -> FakeOpenSearch:
    cluster = FakeOpenSearch()
    cluster.index_docs("books", [{"_id": "dune", "body": "Spice is mined on Arrakis."}])
    return cluster


def _search(client: httpx.AsyncClient, caller: str, pipeline: dict[str, Any] = EXPAND) -> asyncio.Task[httpx.Response]:
    return asyncio.ensure_future(
        client.post("/books/_search", json={**BODY, "search_pipeline": pipeline}, headers=basic(caller))
    )


async def _first_done(tasks: Iterable[asyncio.Task[httpx.Response]], count: int) -> list[httpx.Response]:
    """The first ``count`` answers, as they come (the others still held)."""
    pending = set(tasks)
    done: list[httpx.Response] = []
    while len(done) < count:
        finished, pending = await asyncio.wait(pending, timeout=5, return_when=asyncio.FIRST_COMPLETED)
        assert finished, f"only {len(done)} of {count} answered"
        done += [task.result() for task in finished]
    return done


def _rejected(response: httpx.Response, limit: str) -> None:
    reason = opensearch_error(response, 429, "rejected_execution_exception")
    assert reason.startswith("rejected execution of search pipeline run: ")
    assert reason.endswith(f"({limit})")


def _expanded(response: httpx.Response) -> None:
    assert response.status_code == 200, response.text
    assert response.json()["ext"]["answerbox"]["query_expansion"]["expansion"] == "spice melange arrakis"


async def test_past_the_run_limit_a_search_is_refused_at_once(cluster: FakeOpenSearch) -> None:
    llm = HeldLLM()
    limits = {"max_concurrent_runs": 2, "inline_overrides": True}
    async with in_process(cluster=cluster, llm_app=llm.app(), llm=ROOMY_LLM, limits=limits) as client:
        searches = [_search(client, caller) for caller in "abcd"]
        await llm.until_held(2)
        for refused in await _first_done(searches, 2):
            _rejected(refused, "limits.max_concurrent_runs")
        llm.release.set()
        await asyncio.wait(searches)
        assert sorted(s.result().status_code for s in searches) == [200, 200, 429, 429]
        for search in searches:
            if search.result().status_code == 200:
                _expanded(search.result())
        # Admission is released when a run ends: the next ones are admitted.
        for response in await asyncio.gather(_search(client, "a"), _search(client, "b")):
            _expanded(response)


async def test_a_caller_who_floods_is_refused_before_the_others(cluster: FakeOpenSearch) -> None:
    llm = HeldLLM()
    limits = {"max_runs_per_caller": 2}
    async with in_process(cluster=cluster, llm_app=llm.app(), llm=ROOMY_LLM, limits=limits) as client:
        flood = [_search(client, "flood") for _ in range(5)]
        calm = _search(client, "calm")
        # The admitted runs wait on the LLM until released: the first three answers are refusals.
        for refused in await _first_done([*flood, calm], 3):
            _rejected(refused, "limits.max_runs_per_caller")
        llm.release.set()
        assert sorted(r.status_code for r in await asyncio.gather(*flood)) == [200, 200, 429, 429, 429]
        _expanded(await calm)


async def test_an_msearch_counts_each_pipeline_line(cluster: FakeOpenSearch) -> None:
    llm = HeldLLM()
    limits = {"max_runs_per_caller": 3}
    async with in_process(cluster=cluster, llm_app=llm.app(), llm=ROOMY_LLM, limits=limits) as client:
        lines = "".join(
            json.dumps(x) + "\n"
            for w in ("spice", "sand", "water")
            for x in ({}, {"query": {"match": {"body": w}}, "search_pipeline": EXPAND})
        )
        msearch = asyncio.ensure_future(client.post("/books/_msearch", content=lines, headers={**basic("a"), **NDJSON}))
        await llm.until_held(3)
        _rejected(await _search(client, "a"), "limits.max_runs_per_caller")
        llm.release.set()
        response = await msearch
    assert response.status_code == 200, response.text
    assert len(response.json()["responses"]) == 3


async def test_a_call_that_waits_past_its_time_for_an_llm_slot_degrades(cluster: FakeOpenSearch) -> None:
    llm = HeldLLM()
    settings: dict[str, Any] = {"llm": {"max_concurrent": 1}, "limits": {"inline_overrides": True}}
    hurried = {"request_processors": [{"llm_query_expansion": {"timeout_s": 0.05, "prompt": "Keywords: {{ query }}"}}]}
    async with in_process(cluster=cluster, llm_app=llm.app(), **settings) as client:
        first = _search(client, "a")
        await llm.until_held(1)  # the first call holds the one slot
        second = await _search(client, "b", hurried)
        llm.release.set()
        _expanded(await first)
    # The second waited out its time for the slot and searched without an expansion, never
    # reaching the LLM.
    assert second.status_code == 200, second.text
    (warning,) = second.json()["ext"]["answerbox"]["warnings"]
    fell_back = "[llm_query_expansion] searched with the original query: "
    # The wait for the slot and the expansion's own bound end together: either may say so.
    assert warning in {
        f"{fell_back}the LLM was busy with other searches for 0.05s",
        f"{fell_back}expansion took longer than 0.05s",
    }
    assert [h["_id"] for h in second.json()["hits"]["hits"]] == ["dune"]
    assert len(llm.calls) == 1


async def test_one_request_makes_at_most_its_llm_calls(cluster: FakeOpenSearch) -> None:
    llm = HeldLLM()
    llm.release.set()
    async with in_process(cluster=cluster, llm_app=llm.app(), limits={"max_llm_calls": 2}) as client:
        # Four different questions (identical ones would share one call).
        lines = "".join(
            json.dumps(x) + "\n"
            for w in ("spice", "sand", "water", "worm")
            for x in ({}, {"query": {"match": {"body": w}}, "search_pipeline": EXPAND})
        )
        response = await client.post("/books/_msearch", content=lines, headers=NDJSON)
    assert response.status_code == 200, response.text
    warnings = [r["ext"]["answerbox"]["warnings"] for r in response.json()["responses"]]
    assert len(llm.calls) == 2
    spent = "made its 2 LLM calls (limits.max_llm_calls)"
    assert sum(any(spent in w for w in report) for report in warnings) == 2


class _Users(Identities):
    """The security plugin's answer: the user a caller's authorization names (None: no plugin)."""

    def __init__(self, *, plugin: bool = True) -> None:
        self._plugin = plugin

    async def user(self, caller: Caller) -> str | None:
        return dict(caller.headers).get("authorization") if self._plugin else None


async def test_a_fresh_cookie_is_the_same_caller_where_the_cluster_has_users() -> None:
    first = Caller.from_headers({**basic("flood"), "cookie": "session=1"})
    second = Caller.from_headers({**basic("flood"), "cookie": "session=2; junk=3"})
    other = Caller.from_headers(basic("calm"))
    users = _Users()
    assert await caller_key(first, users) == await caller_key(second, users) != await caller_key(other, users)
    admission = Admission(Limits(max_runs_per_caller=1))
    with admission.admitted(await caller_key(first, users)):
        with pytest.raises(RejectedExecution), admission.admitted(await caller_key(second, users)):
            pass
        with admission.admitted(await caller_key(other, users)):
            pass


async def test_without_users_callers_are_told_apart_by_their_credentials() -> None:
    no_plugin = _Users(plugin=False)
    first = Caller.from_headers({**basic("a"), "cookie": "session=1"})
    assert await caller_key(first, no_plugin) != await caller_key(Caller.from_headers(basic("a")), no_plugin)
    assert await caller_key(Caller(), no_plugin) is None
