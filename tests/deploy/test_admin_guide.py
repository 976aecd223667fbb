"""deploy/ADMIN.md's requests, run in order against answerbox over the embedded default's corpus."""

from __future__ import annotations

import json
import re

import httpx
from answerbox.ops.embedded import load_sample_corpus

from tests.deploy.admin_guide import GUIDE, admin_requests
from tests.ui.embedded import QUESTION, SAMPLE_INDEX, embedded_stack


def test_every_curl_in_the_guide_is_read() -> None:
    blocks = re.findall(r"^```sh\n(.*?)^```", GUIDE.read_text(), re.MULTILINE | re.DOTALL)
    assert len(admin_requests()) == sum(block.count("curl ") for block in blocks) >= 6


def test_admin_requests_register_default_ask_and_watch(osmem_url: str, client: httpx.Client) -> None:
    load_sample_corpus(osmem_url)
    with embedded_stack(osmem_url) as stack:
        answers = {}
        for request in admin_requests():
            response = client.request(request.method, f"{stack.url}{request.path}", json=request.body)
            assert response.status_code == 200, f"{request.method} {request.path}: {response.text}"
            answers[(request.method, request.path.split("?")[0])] = response
    search = answers[("POST", f"/{SAMPLE_INDEX}/_search")].json()
    # The index default ran: the question was expanded (by the oracle's keywords) and answered.
    report = search["ext"]["answerbox"]
    assert report["query_expansion"]["expansion"] == stack.oracle.keywords
    assert report["query_expansion"]["fallback"] is False
    assert report["warnings"] == []
    # prefer generative: the LLM's sentence, its citation held up, is held back as the candidate
    # below the model's min_confidence (the search abstains, saying why).
    answer = report["answer"]
    assert answer["llm"] == "used"
    assert (answer["abstained"], answer["reason"], answer["mode"]) == (True, "low_confidence", "generative")
    candidate = answer["candidate"]
    assert (candidate["text"], candidate["mode"]) == (stack.oracle.answers[0], "generative")
    assert [c["marker"] for c in candidate["citations"]] == [1]
    stream = answers[("POST", f"/{SAMPLE_INDEX}/_answerbox/stream")]
    assert stream.headers["content-type"].startswith("text/event-stream")
    events = re.findall(r"^event: (\w+)$", stream.text, re.MULTILINE)
    assert events[:3] == ["search", "hits", "snippet"]
    assert "sentence" in events  # the LLM's checked sentence
    assert events[-2:] == ["answer", "done"]
    stats = next(iter(answers[("GET", "/_answerbox/stats/search_pipeline")].json()["nodes"].values()))[
        "search_pipeline"
    ]
    pipeline = stats["pipelines"]["answers"]
    assert pipeline["request"]["count"] >= 2
    assert pipeline["response"]["count"] >= 1
    assert [next(iter(p)) for p in pipeline["response_processors"]] == ["retrieval_evaluator", "cited_answer"]
    assert QUESTION in json.dumps(next(r.body for r in admin_requests() if r.path.endswith("/_search")))
