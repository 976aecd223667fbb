"""What the URL (or an ``_msearch`` line's header) narrows, a processor's own search keeps.

``?_source=false``, ``?_source_includes``, ``?_source_excludes`` and ``stored_fields`` hide
fields as the body's ``_source`` does; an ``_msearch`` header's ``routing`` narrows that line
as the URL's does for ``_search``. CRAG's corrective search, which here may read the hidden
field, must never turn it into a knowledge strip.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index
from tests.support.recording_proxy import RecordingProxy
from tests.support.servers import serve

DOCS = [
    {"_id": "d1", "text": "Kevin Drew was born in Toronto, Ontario.", "secret": "none"},
    # Found only through its hidden field, which the corrective search also searches.
    {"_id": "d2", "text": "An unrelated note.", "secret": "Kevin Drew was born in vault code 4711."},
]
QUERY = {"match": {"text": "Kevin Drew born"}}
# Every hit graded ambiguous: the corrective search always runs, over the hidden field too, and
# every passage it finds may become knowledge.
PIPELINE = {
    "response_processors": [
        {
            "retrieval_evaluator": {
                "upper": 1.0,
                "lower": -1.0,
                "corrective": {"fields": ["text", "secret"], "keywords": "question"},
            }
        }
    ]
}


@dataclass
class Hop:
    url: str
    recorder: RecordingProxy


@pytest.fixture
def hop(opensearch: OpenSearch, make_answerbox: AnswerboxFactory, osmem_url: str) -> Iterator[Hop]:
    properties = {"text": {"type": "text"}, "secret": {"type": "text"}}
    bulk_index(opensearch, "vault", [dict(d) for d in DOCS], {"properties": properties})
    recorder = RecordingProxy(osmem_url)
    with serve(recorder.app()) as hop_url:
        yield Hop(make_answerbox(opensearch={"url": hop_url}), recorder)


@pytest.mark.parametrize(
    ("params", "body"),
    [
        ("_source_excludes=secret", {}),
        ("_source=false", {}),
        ("_source_includes=text", {}),
        ("_source=text", {}),
        ("", {"stored_fields": "_none_"}),
        ("stored_fields=text", {}),
    ],
    ids=["source_excludes", "source_false", "source_includes", "source_list", "stored_fields_none", "stored_fields"],
)
def test_fields_the_url_or_stored_fields_hide_never_reach_the_report(
    hop: Hop, client: httpx.Client, params: str, body: dict[str, Any]
) -> None:
    response = client.post(
        f"{hop.url}/vault/_search?{params}", json={"query": QUERY, **body, "search_pipeline": PIPELINE}
    )
    assert response.status_code == 200, response.text
    retrieval = response.json()["ext"]["answerbox"]["retrieval"]
    assert retrieval["action"] == "refine+corrective_search"
    assert "vault code" not in json.dumps(response.json())
    corrective = json.loads(hop.recorder.matching("/vault/_search")[-1].body)
    assert "multi_match" in json.dumps(corrective["query"])
    source = corrective["_source"]
    assert source is False or "secret" in source["excludes"] or "secret" not in source["includes"]


def test_an_msearch_lines_routing_binds_that_lines_own_searches(hop: Hop, client: httpx.Client) -> None:
    lines = [
        {"index": "vault", "routing": "r1", "preference": "_local"},
        {"query": QUERY, "_source": {"excludes": ["secret"]}, "search_pipeline": PIPELINE},
    ]
    ndjson = "".join(json.dumps(line) + "\n" for line in lines)
    response = client.post(f"{hop.url}/_msearch", content=ndjson, headers={"content-type": "application/x-ndjson"})
    assert response.status_code == 200, response.text
    (answer,) = response.json()["responses"]
    assert answer["ext"]["answerbox"]["retrieval"]["action"] == "refine+corrective_search"
    corrective = hop.recorder.matching("/vault/_search")[-1]
    assert "routing=r1" in corrective.query
    assert "preference=_local" in corrective.query
