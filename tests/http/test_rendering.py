"""``filter_path`` and ``pretty`` on the answers answerbox writes: applied as osmem-server (OpenSearch's
REST API) applies them, after the pipeline read the whole hits."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import yaml
from answerbox.http.rendering import Rendering
from opensearchpy import OpenSearch

from tests.conftest import bulk_index
from tests.support.books import answer_search, search
from tests.unit.asgi import opensearch_error

SHELF = [
    {
        "_id": "1",
        "t": "dune desert",
        "n": 3,
        "o": {"a": 1, "b": {"c": 2}},
        "tags": ["x", "y"],
        "list": [{"k": 1, "j": 2}, {"k": 4}],
    },
    {"_id": "2", "t": "emma", "n": 5, "o": {}, "list": [{"j": 3}]},
]
SHELF_SEARCH = {"query": {"match_all": {}}, "aggs": {"top": {"max": {"field": "n"}}}}
EXPRESSIONS = [
    "hits.hits._id",
    "hits.hits._source.o.b",
    "-hits.hits._source",
    "-hits",
    "hits.total,-hits.total.relation",
    "**.value",
    "hits.**.c",
    "hits.*.relation",
    "h*.hits._id",
    "nothing",
    "-nothing",
    "-_shards.*",
    "hits.hits._source.o,-hits.hits._source.o.a",
    "-hits.hits._source.o.a",
    "-hits.hits._source.list",
    "hits.hits._source.list,-hits.hits._source.list.j",
    "took,,hits.total",
    " took , hits.total",
    "hits.hits.*",
    "**",
    "aggregations.top.value",
    "hits.hits._source.tags",
    "-hits.hits._source.tags",
    "hits.hits._source.list.k",
    "-hits.hits._source.list.k",
    "hits.hits._source.o",
]


def _untimed(body: Any) -> Any:
    # Two searches seldom take the same milliseconds.
    return {**body, "took": 0} if isinstance(body, dict) and "took" in body else body


@pytest.fixture
def shelf(opensearch: OpenSearch, osmem_url: str) -> Callable[[dict[str, str]], Any]:
    """osmem-server's answer to the shelf's search with these URL parameters."""
    bulk_index(opensearch, "shelf", [dict(d) for d in SHELF])

    def answer(params: dict[str, str]) -> Any:
        response = httpx.post(f"{osmem_url}/shelf/_search", params=params, json=SHELF_SEARCH)
        assert response.status_code == 200
        return _untimed(response.json())

    return answer


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_filter_path_leaves_what_opensearch_leaves(expression: str, shelf: Callable[[dict[str, str]], Any]) -> None:
    rendering, rest = Rendering.split({"filter_path": expression, "size": "3"})
    assert rest == {"size": "3"}
    assert rendering.filtered(shelf({})) == shelf({"filter_path": expression})


def test_a_pipeline_reads_the_whole_hits_and_writes_its_answer_filtered(
    books: OpenSearch, answerbox: str, client: httpx.Client
) -> None:
    body = answer_search(prefer="confident")
    whole = search(client, answerbox, body)
    answer = whole["ext"]["answerbox"]["answer"]
    assert not answer["abstained"]
    assert answer["citations"]
    filtered = client.post(
        f"{answerbox}/books/_search", params={"filter_path": "hits.hits._id,ext.answerbox.answer"}, json=body
    )
    assert filtered.status_code == 200
    # The reader read the hits' text, which the filter leaves out of what the caller sees.
    assert filtered.json() == {
        "hits": {"hits": [{"_id": hit["_id"]} for hit in whole["hits"]["hits"]]},
        "ext": {"answerbox": {"answer": answer}},
    }
    # Written as OpenSearch writes it: the same bytes as the plain search's, which it wrote itself.
    params = {"filter_path": "hits.total", "pretty": ""}
    pretty = client.post(f"{answerbox}/books/_search", params=params, json=body)
    plain = client.post(f"{answerbox}/books/_search", params=params, json={"query": body["query"]})
    assert pretty.headers["content-type"] == plain.headers["content-type"]
    assert pretty.text.startswith('{\n  "hits" : {\n')
    assert pretty.text == plain.text


def test_an_msearch_is_filtered_whole(books: OpenSearch, answerbox: str, client: httpx.Client) -> None:
    lines = [{}, answer_search(prefer="confident"), {}, {"query": {"match_all": {}}}]
    ndjson = "".join(json.dumps(line) + "\n" for line in lines)
    answer = client.post(
        f"{answerbox}/books/_msearch",
        params={"filter_path": "responses.hits.total.value,responses.ext.answerbox.answer.abstained"},
        content=ndjson,
        headers={"content-type": "application/x-ndjson"},
    )
    assert answer.status_code == 200
    assert answer.json() == {
        "responses": [
            {"hits": {"total": {"value": 3}}, "ext": {"answerbox": {"answer": {"abstained": False}}}},
            {"hits": {"total": {"value": 3}}},
        ]
    }


def test_format_yaml_writes_the_answer_as_yaml_and_a_binary_format_is_refused(
    books: OpenSearch, answerbox: str, client: httpx.Client
) -> None:
    body = answer_search(prefer="confident")
    as_json = client.post(f"{answerbox}/books/_search", params={"filter_path": "hits.total,ext"}, json=body)
    as_yaml = client.post(
        f"{answerbox}/books/_search", params={"filter_path": "hits.total,ext", "format": "yaml"}, json=body
    )
    assert as_yaml.status_code == 200, as_yaml.text
    assert as_yaml.headers["content-type"] == "application/yaml"
    assert as_yaml.text.startswith("---\n")
    written = yaml.safe_load(as_yaml.text)
    assert written["ext"]["answerbox"]["answer"]["text"] == as_json.json()["ext"]["answerbox"]["answer"]["text"]
    assert written["hits"] == as_json.json()["hits"]
    for binary in ("cbor", "smile"):
        refused = client.post(f"{answerbox}/books/_search", params={"format": binary}, json=body)
        assert f"format [{binary}]" in opensearch_error(refused, 400, "illegal_argument_exception")
