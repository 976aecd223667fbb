"""Over real HTTP: while a hostile stored template is refused (an OpenSearch-shaped 400), the
server goes on answering others, even while one that the sandbox cannot stop is stopped in
the prompt worker; a caller who may not store pipelines is refused before anything is built.
The templates themselves, hostile and ordinary, and what a search's own pipeline may set are
told in-process (tests/unit/security/test_prompt_templates.py)."""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from answerbox.prompts import worker as prompt_worker
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index
from tests.support import faulty_prompt_worker
from tests.support.auth_proxy import AuthProxy, User, basic
from tests.support.lag import lag_of
from tests.support.servers import serve


def _pipeline(prompt: str) -> dict[str, object]:
    return {"request_processors": [{"llm_query_expansion": {"prompt": prompt}}]}


def _refused(response: httpx.Response) -> str:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "illegal_argument_exception"
    assert "llm_query_expansion" in error["reason"]
    assert error["root_cause"][0]["type"] == "illegal_argument_exception"
    return str(error["reason"])


def test_the_server_answers_others_while_a_hostile_template_is_refused(answerbox: str, client: httpx.Client) -> None:
    """The tower of powers took 11 s of one C call before, with the whole process stalled."""
    hostile = _pipeline("{{ (((((10**64)**64)**64)**64)**64) > 0 }} {{ query }}")
    answers: list[float] = []

    def probe() -> None:
        with httpx.Client(timeout=10) as other:
            started = time.monotonic()
            assert other.get(f"{answerbox}/_answerbox/stats/search_pipeline").status_code == 200
            answers.append(time.monotonic() - started)

    threads = [threading.Thread(target=probe) for _ in range(3)]
    for thread in threads:
        thread.start()
    _refused(client.put(f"{answerbox}/_search/pipeline/hostile", json=hostile))
    for thread in threads:
        thread.join()
    assert len(answers) == 3
    assert max(answers) < 2


def test_a_class_method_feeding_sum_is_refused_without_stalling_the_server(
    answerbox: str, client: httpx.Client
) -> None:
    """``dict.fromkeys`` (a method of a type, weighed by nothing) made 70,000 one-item lists, and
    ``sum`` with a list to start from concatenated them: one C call that stalled this PUT, and
    every other request, for about 3 s."""
    hostile = _pipeline("{{ dict.fromkeys(range(70000), ['']).values()|sum(start=[]) }} {{ query }}")
    with lag_of(answerbox) as lag:
        started = time.monotonic()
        reason = _refused(client.put(f"{answerbox}/_search/pipeline/hostile", json=hostile))
        took = time.monotonic() - started
    assert "fromkeys" in reason
    assert took < 1
    assert lag.polls
    assert lag.longest_s < 0.2, lag.longest_s


def test_an_override_the_sandbox_cannot_stop_is_stopped_in_its_worker_without_stalling_the_server(
    make_answerbox: AnswerboxFactory, client: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What no pre-check foresaw, standing in as globals of a worker built for this test: one C
    call that would hold the interpreter lock for hours (``stall()``), and an allocation of 2 GB
    (``hog()``). In the server's process either would stall every request; in the prompt worker
    the first is killed at the timeout and the second fails at the worker's memory cap."""
    monkeypatch.setattr(prompt_worker, "WORKER_COMMAND", faulty_prompt_worker.COMMAND)
    url = make_answerbox()
    with lag_of(url) as lag:
        started = time.monotonic()
        stalled = _refused(client.put(f"{url}/_search/pipeline/p", json=_pipeline("{{ stall() }} {{ query }}")))
        took = time.monotonic() - started
        hogged = _refused(client.put(f"{url}/_search/pipeline/p", json=_pipeline("{{ hog() }} {{ query }}")))
    assert stalled.endswith(f"did not render within {prompt_worker.RENDER_TIMEOUT_S:g}s and was stopped"), stalled
    assert took < prompt_worker.RENDER_TIMEOUT_S + 2
    assert hogged.endswith("failed to render: MemoryError"), hogged
    assert lag.polls
    assert lag.longest_s < 0.2, lag.longest_s
    fine = client.put(f"{url}/_search/pipeline/p", json=_pipeline("Keywords for {{ query }}"))
    assert (fine.status_code, fine.json()) == (200, {"acknowledged": True})


def test_a_caller_who_may_not_store_pipelines_is_refused_before_anything_is_built(
    make_answerbox: AnswerboxFactory, opensearch: OpenSearch, osmem_url: str, client: httpx.Client
) -> None:
    bulk_index(opensearch, "books", [{"_id": "dune", "body": "Spice is mined on Arrakis."}])
    users = {
        "admin": User("a", write=("*",)),
        "reader": User("r", read=("books",)),
        "service": User("s", read=("*",), write=(".answerbox-*",)),
    }
    proxy = AuthProxy(osmem_url, users)
    with serve(proxy.app()) as proxy_url:
        url = make_answerbox(opensearch={"url": proxy_url, "service_username": "service", "service_password": "s"})
        # A broken template is a 400 for the admin, but the reader learns only that it may not write.
        broken = _pipeline("{{ undefined_name }}")
        assert client.put(f"{url}/_search/pipeline/p", json=broken, headers=basic("reader", "r")).status_code == 403
        assert client.put(f"{url}/_search/pipeline/p", json=broken).status_code == 401
        assert client.put(f"{url}/_search/pipeline/p", json=broken, headers=basic("admin", "a")).status_code == 400
        fine = _pipeline("Keywords for {{ query }}")
        assert client.put(f"{url}/_search/pipeline/p", json=fine, headers=basic("admin", "a")).status_code == 200


@pytest.mark.parametrize("nesting", ["(" * 4000 + "1" + ")" * 4000, "[" * 4000 + "]" * 4000])
def test_an_override_nested_too_deeply_to_compile_is_a_400_not_a_500(
    answerbox: str, client: httpx.Client, nesting: str
) -> None:
    """Jinja2's parser recursed past Python's stack on this text (within the length limit), and
    the RecursionError escaped as a 500."""
    reason = _refused(
        client.put(f"{answerbox}/_search/pipeline/deep", json=_pipeline(f"{{{{ {nesting} }}}} {{{{ query }}}}"))
    )
    assert "nested too deeply" in reason, reason
    assert "Traceback" not in reason
    fine = client.put(f"{answerbox}/_search/pipeline/deep", json=_pipeline("Keywords for {{ query }}"))
    assert (fine.status_code, fine.json()) == (200, {"acknowledged": True})
