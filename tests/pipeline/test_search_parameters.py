"""A pipeline's search takes OpenSearch's parameters as OpenSearch does, those opensearch-py would
take as its own included: ``timeout`` is the search's time budget, sent on (it was read as the
client's timeout and failed the search), and ``ignore`` or ``request_timeout``, which OpenSearch
does not know, are refused as it refuses them."""

from __future__ import annotations

import httpx
from opensearchpy import OpenSearch

from tests.conftest import RecordedFactory
from tests.support.books import answer_search
from tests.unit.asgi import opensearch_error


def test_timeout_goes_on_as_the_search_s_own(
    books: OpenSearch, recorded_answerbox: RecordedFactory, client: httpx.Client
) -> None:
    recorder, url = recorded_answerbox()
    found = client.post(f"{url}/books/_search", params={"timeout": "2s"}, json=answer_search(prefer="confident"))
    assert found.status_code == 200, found.text
    assert found.json()["ext"]["answerbox"]["answer"]["text"]
    searches = [r for r in recorder.requests if r.path == "/books/_search"]
    assert searches
    assert all("timeout=2s" in r.query for r in searches)


def test_parameters_opensearch_does_not_know_are_refused_as_it_refuses_them(
    books: OpenSearch, answerbox: str, osmem_url: str, client: httpx.Client
) -> None:
    body = answer_search(prefer="confident")
    for name in ("ignore", "request_timeout"):
        via = client.post(f"{answerbox}/books/_search", params={name: "404"}, json=body)
        direct = client.post(f"{osmem_url}/books/_search", params={name: "404"}, json={"query": body["query"]})
        reason = opensearch_error(via, 400, "illegal_argument_exception")
        assert direct.json()["error"]["reason"].startswith(reason)
