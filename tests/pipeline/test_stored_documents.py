"""A document in the pipelines index that holds no pipeline (written past answerbox, or by a
version with other options) is left out of the pipeline list, never a 500 for everyone."""

from __future__ import annotations

import httpx
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory
from tests.support.processors import registry_with_test_processors

PIPELINES = ".answerbox-pipelines"
PIPELINE = {"response_processors": [{"label_hits": {"label": "seen"}}]}


def test_a_document_without_a_definition_leaves_the_list_working(
    make_answerbox: AnswerboxFactory, opensearch: OpenSearch, client: httpx.Client
) -> None:
    url = make_answerbox(registry_with_test_processors())
    assert client.put(f"{url}/_search/pipeline/good", json=PIPELINE).status_code == 200
    opensearch.index(index=PIPELINES, id="raw", body={"note": "written past answerbox"}, refresh=True)
    opensearch.index(index=PIPELINES, id="old", body={"definition": {"response_processors": 3}}, refresh=True)

    listed = client.get(f"{url}/_search/pipeline")
    assert listed.status_code == 200, listed.text
    assert listed.json() == {"good": PIPELINE}
    assert client.get(f"{url}/_search/pipeline/*o*").json() == {"good": PIPELINE}
    assert client.get(f"{url}/_search/pipeline/raw").status_code == 404
    # A search naming it is refused as for any pipeline that does not validate, not a 500.
    named = client.post(f"{url}/books/_search?search_pipeline=raw", json={})
    assert named.status_code == 400, named.text
    assert named.json()["error"]["type"] == "illegal_argument_exception"
