"""Who may manage pipelines is OpenSearch's decision: the pipeline API runs with the caller's
own credentials against the pipelines index, while resolving a pipeline for a search uses the
service account. Tested through a small security proxy in front of osmem-server."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index
from tests.support.auth_proxy import AuthProxy, User, basic
from tests.support.servers import serve

PIPELINES = ".answerbox-pipelines"
PIPELINE = {"description": "admin's", "response_processors": [{"retrieval_evaluator": {"corrective": None}}]}
ADMIN, READER, SERVICE = basic("admin", "a"), basic("reader", "r"), basic("service", "s")


@pytest.fixture
def secured(make_answerbox: AnswerboxFactory, opensearch: OpenSearch, osmem_url: str) -> Any:
    bulk_index(opensearch, "books", [{"_id": "dune", "body": "Spice is mined on Arrakis."}])
    users = {
        "admin": User("a", write=("*",)),
        "reader": User("r", read=("books",)),
        # The service account: answerbox's own indices, and index settings for defaults.
        "service": User("s", read=("*",), write=(PIPELINES, ".answerbox-cache")),
    }
    proxy = AuthProxy(osmem_url, users)
    with serve(proxy.app()) as proxy_url:
        url = make_answerbox(opensearch={"url": proxy_url, "service_username": "service", "service_password": "s"})
        yield url, proxy


def test_only_callers_opensearch_lets_write_the_index_manage_pipelines(secured: Any, client: httpx.Client) -> None:
    url, proxy = secured
    for headers, status in (({}, 401), (READER, 403)):
        assert client.put(f"{url}/_search/pipeline/answers", json=PIPELINE, headers=headers).status_code == status
        assert client.get(f"{url}/_search/pipeline/answers", headers=headers).status_code == status
        assert client.get(f"{url}/_search/pipeline", headers=headers).status_code == status
    assert client.get(f"{url}/_search/pipeline", headers=ADMIN).json() == {}

    assert client.put(f"{url}/_search/pipeline/answers", json=PIPELINE, headers=ADMIN).status_code == 200
    assert client.get(f"{url}/_search/pipeline/answers", headers=ADMIN).json() == {"answers": PIPELINE}
    # A reader can neither replace nor delete the admin's pipeline, nor read its prompts.
    shadow: dict[str, Any] = {"response_processors": [{"cited_answer": {}}]}
    assert client.put(f"{url}/_search/pipeline/answers", json=shadow, headers=READER).status_code == 403
    assert client.delete(f"{url}/_search/pipeline/answers", headers=READER).status_code == 403
    assert client.delete(f"{url}/_search/pipeline/answers").status_code == 401
    assert client.get(f"{url}/_search/pipeline/answers", headers=ADMIN).json() == {"answers": PIPELINE}
    error = client.delete(f"{url}/_search/pipeline/answers", headers=READER).json()
    assert error["status"] == 403
    assert error["error"]["type"] == "security_exception"
    assert ("reader", "DELETE", f"/{PIPELINES}/_doc/answers") in proxy.denied

    assert client.delete(f"{url}/_search/pipeline/answers", headers=ADMIN).status_code == 200
    assert client.get(f"{url}/_search/pipeline/answers", headers=ADMIN).status_code == 404


def test_a_reader_runs_the_admins_pipeline_on_what_it_may_read(secured: Any, client: httpx.Client) -> None:
    url, _ = secured
    assert client.put(f"{url}/_search/pipeline/answers", json=PIPELINE, headers=ADMIN).status_code == 200
    body = {"query": {"match": {"body": "spice"}}}
    found = client.post(f"{url}/books/_search?search_pipeline=answers", json=body, headers=READER)
    assert found.status_code == 200, found.text
    assert [h["_id"] for h in found.json()["hits"]["hits"]] == ["dune"]
    assert found.json()["ext"]["answerbox"]["retrieval"]["verdict"]
    # Resolution used the service account; the search itself still ran as the reader.
    assert client.post(f"{url}/books/_search?search_pipeline=answers", json=body).status_code == 401
    assert (
        client.post(f"{url}/{PIPELINES}/_search?search_pipeline=answers", json=body, headers=READER).status_code == 403
    )


def test_before_the_pipelines_index_exists_a_caller_who_may_not_write_it_is_refused(
    make_answerbox: AnswerboxFactory, opensearch: OpenSearch, osmem_url: str, client: httpx.Client
) -> None:
    """A cluster may answer a request on an index it does not hold with 404 index_not_found
    before judging any rights. The rights probe took that 404 as a grant: before the first
    pipeline was stored, every caller passed it, had its pipeline built, and the service account
    created the index. Now the index is created and the caller asked again."""
    bulk_index(opensearch, "books", [{"_id": "dune", "body": "Spice is mined on Arrakis."}])
    users = {
        "admin": User("a", write=("*",)),
        "reader": User("r", read=("books",)),
        "service": User("s", read=("*",), write=(PIPELINES, ".answerbox-cache")),
    }
    proxy = AuthProxy(osmem_url, users, missing_before_rights=True)
    with serve(proxy.app()) as proxy_url:
        url = make_answerbox(opensearch={"url": proxy_url, "service_username": "service", "service_password": "s"})
        assert not opensearch.indices.exists(index=PIPELINES)
        # A broken template is the admin's 400; the reader learns only that it may not write.
        broken = {"request_processors": [{"llm_query_expansion": {"prompt": "{{ undefined_name }}"}}]}
        refused = client.put(f"{url}/_search/pipeline/answers", json=broken, headers=READER)
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"]["type"] == "security_exception"
        assert client.put(f"{url}/_search/pipeline/answers", json=PIPELINE, headers=READER).status_code == 403
        assert ("reader", "DELETE") in {(user, method) for user, method, _ in proxy.denied}
        assert client.put(f"{url}/_search/pipeline/answers", json=broken, headers=ADMIN).status_code == 400
        assert client.put(f"{url}/_search/pipeline/answers", json=PIPELINE, headers=ADMIN).status_code == 200
        assert client.get(f"{url}/_search/pipeline/answers", headers=ADMIN).json() == {"answers": PIPELINE}
