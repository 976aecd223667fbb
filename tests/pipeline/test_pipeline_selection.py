"""Which pipeline a search runs, where it takes OpenSearch itself: an index's default as its
settings hold it, ``_none``, and an id no pipeline has, left to OpenSearch. The rest (the
parameter, the body field, inline pipelines, _msearch lines, failures, verbose results,
stats, credentials) is told in-process (tests/unit/pipeline/test_pipeline_selection.py)."""

from __future__ import annotations

import json

import httpx
import pytest
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index
from tests.support.processors import DOCS, FILTER_DUNE, LABEL, QUERY, registry_with_test_processors


@pytest.fixture
def url(make_answerbox: AnswerboxFactory, opensearch: OpenSearch, client: httpx.Client) -> str:
    bulk_index(
        opensearch,
        "books",
        [dict(d) for d in DOCS],
        {"properties": {"title": {"type": "keyword"}, "body": {"type": "text"}}},
    )
    url = make_answerbox(registry=registry_with_test_processors())
    for name, body in (("dune_only", FILTER_DUNE), ("labels", LABEL)):
        assert client.put(f"{url}/_search/pipeline/{name}", json=body).status_code == 200
    return url


def _ids(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return sorted(h["_id"] for h in response.json()["hits"]["hits"])


def test_index_default_and_none(url: str, client: httpx.Client, opensearch: OpenSearch) -> None:
    opensearch.indices.put_settings(index="books", body={"index.search.default_pipeline": "dune_only"})
    assert _ids(client.post(f"{url}/books/_search", json=QUERY)) == ["1"]
    assert _ids(client.post(f"{url}/books/_search?search_pipeline=_none", json=QUERY)) == ["1", "2"]
    # An explicit pipeline replaces the default.
    labelled = client.post(f"{url}/books/_search?search_pipeline=labels", json=QUERY)
    assert _ids(labelled) == ["1", "2"]


def test_an_msearch_line_runs_its_index_default(
    url: str, client: httpx.Client, opensearch: OpenSearch, osmem_url: str
) -> None:
    """No line names a pipeline: the default of the index a line's header targets still applies."""
    opensearch.indices.put_settings(index="books", body={"index.search.default_pipeline": "dune_only"})
    lines = [{"index": "books"}, QUERY, {"index": "books"}, {"query": {"match_all": {}}}]
    payload = "".join(json.dumps(line) + "\n" for line in lines)
    ndjson = {"content-type": "application/x-ndjson"}

    def ids(response: httpx.Response) -> list[list[str]]:
        assert response.status_code == 200, response.text
        return [sorted(h["_id"] for h in r["hits"]["hits"]) for r in response.json()["responses"]]

    assert ids(client.post(f"{url}/_msearch", content=payload, headers=ndjson)) == [["1"], ["1"]]
    direct = client.post(f"{osmem_url}/_msearch", content=payload, headers=ndjson)
    assert ids(direct) == [["1", "2"], ["1", "2", "3"]]


def test_unknown_pipeline_id_is_left_to_opensearch(url: str, client: httpx.Client, osmem_url: str) -> None:
    via = client.post(f"{url}/books/_search?search_pipeline=nope", json=QUERY)
    direct = client.post(f"{osmem_url}/books/_search?search_pipeline=nope", json=QUERY)
    assert (via.status_code, via.json()) == (direct.status_code, direct.json())


NAMED = json.dumps({"search_pipeline": "dune_only", **QUERY})


@pytest.mark.parametrize(
    "content",
    [NAMED.replace("search_pipeline", "search\\u005fpipeline").encode(), NAMED.encode("utf-16")],
    ids=["escaped", "utf-16"],
)
def test_a_body_naming_its_pipeline_in_any_spelling_json_reads_runs_it(
    url: str, client: httpx.Client, content: bytes
) -> None:
    """A plain search goes on unparsed; one whose body may name a pipeline is parsed, however it spells it."""
    assert _ids(client.post(f"{url}/books/_search", json=QUERY)) == ["1", "2"]
    searched = client.post(f"{url}/books/_search", content=content, headers={"content-type": "application/json"})
    assert _ids(searched) == ["1"]
