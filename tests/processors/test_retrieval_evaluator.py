"""retrieval_evaluator (CRAG) end to end: answerbox under uvicorn in front of osmem-server with
the shipped ONNX evaluator judging real hits, its corrective search sent as the caller, and the
keyword rewrite by a scripted LLM (or the real one, in the ``real_llm`` test). The processor's
rules (verdicts, refinement, rerank, drop, degradation, config errors) are unit tests:
``tests/unit/processors/retrieval_evaluator``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import pairwise
from typing import Any

import httpx
import pytest
from answerbox.ops.embedded import SAMPLE_PIPELINE
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, RecordedFactory, bulk_index, completions
from tests.support.recording_proxy import RecordingProxy
from tests.support.scripted_llm import ScriptedLLM
from tests.support.servers import serve

WIKI = [
    {
        "_id": "eiffel",
        "title": "Eiffel Tower",
        "text": "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. "
        "It is named after the engineer Gustave Eiffel, whose company designed and built the tower from 1887 to 1889. "
        'Locally nicknamed "La dame de fer" (French for "Iron Lady"), it was the centrepiece of the 1889 '
        "World's Fair. "
        "The tower is 330 m tall, about the same height as an 81-storey building. "
        "It was the tallest man-made structure in the world until the Chrysler Building in New York was "
        "finished in 1930.",
        "topic": "architecture",
    },
    {
        "_id": "everest",
        "title": "Mount Everest",
        "text": "Mount Everest is Earth's highest mountain above sea level, in the Mahalangur Himal sub-range of the "
        "Himalayas. "
        "The China-Nepal border runs across its summit point. "
        "Its elevation of 8,848.86 m was most recently established in 2020 by the Chinese and Nepali authorities. "
        "The first recorded ascent was made by Edmund Hillary and Tenzing Norgay in 1953.",
        "topic": "geography",
    },
    {
        "_id": "photosynthesis",
        "title": "Photosynthesis",
        "text": "Photosynthesis is the process by which plants and algae convert light energy into chemical energy. "
        "It takes place mostly in the chloroplasts of leaf cells. "
        "Carbon dioxide and water are turned into glucose, and oxygen is released as a by-product.",
        "topic": "biology",
    },
    {
        "_id": "nile",
        "title": "Nile",
        "text": "The Nile is a major north-flowing river in northeastern Africa. "
        "It flows into the Mediterranean Sea after crossing eleven countries. "
        "With a length of about 6,650 km it is often regarded as the longest river in the world.",
        "topic": "geography",
    },
]
NEWS = [
    {
        "_id": "budget",
        "text": "The city council approved a new budget for road repairs on Tuesday. The vote was seven to two.",
    },
    {
        "_id": "football",
        "text": "The local team won the regional football championship after a penalty shoot-out on Saturday.",
    },
    {"_id": "bakery", "text": "A new bakery opened on Main Street, selling sourdough bread and cakes every morning."},
]
MAPPINGS = {"properties": {"title": {"type": "text"}, "text": {"type": "text"}, "topic": {"type": "keyword"}}}

EVEREST_Q = "When was the first recorded ascent of Mount Everest?"
# Pinned thresholds: the tests check CRAG's rules, not one calibration (the manifest's change
# with every retrain). On the calibrated 2P-1 scale the shipped model puts the fixtures'
# answering passages at about 0.7 to 0.8 and unrelated ones near -0.95.
VERDICT_THRESHOLDS = {"upper": 0.4, "lower": -0.7}
AUTH = "Basic YWxpY2U6czNjcjN0"


@pytest.fixture
def corpus(opensearch: OpenSearch) -> OpenSearch:
    bulk_index(opensearch, "wiki", [dict(d) for d in WIKI], MAPPINGS)
    bulk_index(opensearch, "news", [dict(d) for d in NEWS], MAPPINGS)
    return opensearch


@pytest.fixture
def llm() -> Iterator[tuple[ScriptedLLM, str]]:
    scripted = ScriptedLLM(replies=["Mount Everest, first recorded ascent"])
    with serve(scripted.app()) as url:
        yield scripted, f"{url}/v1"


def _pipeline(**config: Any) -> dict[str, Any]:
    return {"response_processors": [{"retrieval_evaluator": {"text_fields": ["text"], **VERDICT_THRESHOLDS, **config}}]}


def _post(client: httpx.Client, url: str, index: str, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post(f"{url}/{index}/_search", json=body, headers={"Authorization": AUTH})
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def _search_all(client: httpx.Client, url: str, index: str, question: str, pipeline: dict[str, Any]) -> dict[str, Any]:
    """Every document of ``index`` as hits, judged against ``question``."""
    ext = {"generative_qa_parameters": {"llm_question": question}}
    return _post(client, url, index, {"query": {"match_all": {}}, "search_pipeline": pipeline, "ext": ext})


def _retrieval(result: dict[str, Any]) -> dict[str, Any]:
    retrieval: dict[str, Any] = result["ext"]["answerbox"]["retrieval"]
    assert retrieval is not None, result["ext"]["answerbox"]["warnings"]
    return retrieval


def _assert_exact_offsets(knowledge: list[dict[str, Any]], opensearch: OpenSearch) -> None:
    for strip in knowledge:
        source = opensearch.get(index=strip["_index"], id=strip["_id"])["_source"]
        assert source[strip["field"]][strip["start"] : strip["end"]] == strip["text"]


def test_incorrect_verdict_discards_hits_and_searches_elsewhere_as_the_caller(
    recorded_answerbox: RecordedFactory,
    corpus: OpenSearch,
    client: httpx.Client,
    llm: tuple[ScriptedLLM, str],
) -> None:
    scripted, llm_url = llm
    recorder, url = recorded_answerbox(llm={"base_url": llm_url})
    pipeline = _pipeline(corrective={"index": "wiki"})
    result = _search_all(client, url, "news", EVEREST_Q, pipeline)
    retrieval = _retrieval(result)
    assert retrieval["verdict"] == "incorrect"
    assert len(retrieval["scores"]) == len(NEWS)
    assert all(s["score"] < retrieval["lower"] for s in retrieval["scores"])
    assert retrieval["action"] == "corrective_search"
    assert retrieval["corrective_query"] == "Mount Everest first recorded ascent"
    assert retrieval["corrective"]["keywords_source"] == "llm"
    assert EVEREST_Q in scripted.calls[0]["messages"][0]["content"]
    assert "Extract at most three keywords separated by comma" in scripted.calls[0]["messages"][0]["content"]
    # Knowledge comes from the corrective hits only; the discarded hits stay in the response untouched.
    knowledge = retrieval["knowledge"]
    assert knowledge
    assert {s["_index"] for s in knowledge} == {"wiki"}
    assert any("1953" in s["text"] for s in knowledge)
    _assert_exact_offsets(knowledge, corpus)
    assert {h["_index"] for h in result["hits"]["hits"]} == {"news"}
    # The caller's searches: the replica's warm-up reads its own pipelines index too.
    searches = [r for r in recorder.matching("/_search") if not r.path.startswith("/.answerbox")]
    assert [r.path for r in searches] == ["/news/_search", "/wiki/_search"]
    assert all(r.headers.get("authorization") == AUTH for r in searches)
    match = json.loads(searches[1].body)["query"]["bool"]["must"][0]["multi_match"]
    assert match == {
        "query": "Mount Everest first recorded ascent",
        "operator": "or",
        "fields": ["text"],
        "fuzziness": "AUTO",
        "prefix_length": 2,
    }


def test_a_search_for_no_hits_runs_no_response_processor(
    recorded_answerbox: RecordedFactory,
    corpus: OpenSearch,
    client: httpx.Client,
    llm: tuple[ScriptedLLM, str],
) -> None:
    """``size`` 0, in the body or the URL (a count or aggregations: what Dashboards' visualisations
    send, to an index's default pipeline too): an answer would rest on hits the caller does not
    see. OpenSearch's answer comes back as it is; no model, no LLM, no search of answerbox's own."""
    scripted, llm_url = llm
    recorder, url = recorded_answerbox(llm={"base_url": llm_url})
    pipeline = _pipeline(corrective={"index": "news"})
    pipeline["response_processors"].append({"cited_answer": {"mode": "extractive", "min_confidence": 0}})
    ext = {"generative_qa_parameters": {"llm_question": "Who won the regional football championship?"}}
    aggs = {"topics": {"terms": {"field": "topic"}}}
    body = {"query": {"match_all": {}}, "aggs": aggs, "search_pipeline": pipeline, "ext": ext}
    direct = corpus.search(index="wiki", body={"query": {"match_all": {}}, "aggs": aggs, "size": 0})
    for sized, params in (({"size": 0}, {}), ({}, {"size": "0"})):
        response = client.post(
            f"{url}/wiki/_search", params=params, json={**body, **sized}, headers={"Authorization": AUTH}
        )
        assert response.status_code == 200, response.text
        result = response.json()
        assert result["hits"]["hits"] == []
        assert result["hits"]["total"] == direct["hits"]["total"]
        assert result["aggregations"] == direct["aggregations"]
        report = result["ext"]["answerbox"]
        assert (report["answer"], report["retrieval"]) == (None, None)
        assert any("asks for no hits (size 0)" in w for w in report["warnings"]), report["warnings"]
    assert not scripted.calls
    searches = [r.path for r in recorder.matching("/_search") if not r.path.startswith("/.answerbox")]
    assert searches == ["/wiki/_search", "/wiki/_search"]
    # With hits, the same search runs the pipeline: nothing in the wiki answers, so CRAG searches the news.
    result = _post(client, url, "wiki", {**body, "size": 4})
    assert _retrieval(result)["action"] == "corrective_search"
    assert scripted.calls
    assert result["ext"]["answerbox"]["answer"] is not None


def test_a_scroll_s_first_page_is_opensearch_s_and_the_export_loses_no_hit(
    recorded_answerbox: RecordedFactory,
    corpus: OpenSearch,
    client: httpx.Client,
    llm: tuple[ScriptedLLM, str],
) -> None:
    """``?scroll=1m``: an export, page by page, whose later pages (``_search/scroll``) pass no
    pipeline. A first page reranked, thinned (``drop_below_lower``) or answered would disagree
    with them and lose the hits dropped; it comes back as OpenSearch gives it, and every page
    together holds every document."""
    scripted, llm_url = llm
    recorder, url = recorded_answerbox(llm={"base_url": llm_url})
    pipeline = _pipeline(rerank=True, drop_below_lower=True, corrective={"index": "news"})
    pipeline["response_processors"].append({"cited_answer": {"mode": "extractive", "min_confidence": 0}})
    ext = {"generative_qa_parameters": {"llm_question": EVEREST_Q}}
    query = {"query": {"match_all": {}}, "size": 2}
    direct = corpus.search(index="wiki", body=query)
    body = {**query, "search_pipeline": pipeline, "ext": ext}
    response = client.post(f"{url}/wiki/_search", params={"scroll": "1m"}, json=body, headers={"Authorization": AUTH})
    assert response.status_code == 200, response.text
    first = response.json()
    assert [h["_id"] for h in first["hits"]["hits"]] == [h["_id"] for h in direct["hits"]["hits"]]
    report = first["ext"]["answerbox"]
    assert (report["answer"], report["retrieval"]) == (None, None)
    assert any("opens a scroll" in w for w in report["warnings"]), report["warnings"]
    seen = [h["_id"] for h in first["hits"]["hits"]]
    scroll_id = first["_scroll_id"]
    while True:
        page = client.post(
            f"{url}/_search/scroll", json={"scroll": "1m", "scroll_id": scroll_id}, headers={"Authorization": AUTH}
        )
        assert page.status_code == 200, page.text
        hits = page.json()["hits"]["hits"]
        if not hits:
            break
        seen += [h["_id"] for h in hits]
        scroll_id = page.json()["_scroll_id"]
    assert sorted(seen) == sorted(d["_id"] for d in WIKI)
    assert not scripted.calls
    searches = [r.path for r in recorder.matching("/_search") if not r.path.startswith("/.answerbox")]
    assert searches[0] == "/wiki/_search"
    assert all(path == "/_search/scroll" for path in searches[1:])
    # Without the scroll, the same search is reranked and judged: the article that answers comes first.
    unscrolled = _post(client, url, "wiki", body)
    assert _retrieval(unscrolled)["reranked"] is True
    assert unscrolled["hits"]["hits"][0]["_id"] == "everest"


def test_a_sure_hit_among_the_engines_first_ends_the_reading_and_every_hit_comes_back(
    make_answerbox: AnswerboxFactory, corpus: OpenSearch, client: httpx.Client
) -> None:
    """The shipped model's own stop (``crag_first_pass_stop``): the Everest article, first, answers."""
    bulk_index(corpus, "both", [dict(d) for d in WIKI + NEWS], MAPPINGS)
    url = make_answerbox()
    everest_first = {"bool": {"should": [{"match": {"text": "Everest"}}, {"match_all": {}}]}}
    ext = {"generative_qa_parameters": {"llm_question": EVEREST_Q}}
    found: dict[int | None, dict[str, Any]] = {}
    for first_pass in (2, None):
        pipeline = _pipeline(first_pass=first_pass, corrective=None)
        body = {"query": everest_first, "search_pipeline": pipeline, "ext": ext}
        found[first_pass] = _post(client, url, "both", body)
    two, one = _retrieval(found[2]), _retrieval(found[None])
    assert [s["_id"] for s in two["scores"]][:1] == ["everest"]
    assert len(two["scores"]) == 2
    assert len(one["scores"]) == len(WIKI + NEWS)
    assert (two["verdict"], one["verdict"]) == ("correct", "correct")
    assert len(found[2]["hits"]["hits"]) == len(WIKI + NEWS)


@pytest.mark.parametrize(
    ("sort", "param"),
    [
        ([{"topic": "asc"}, "_id"], None),  # the caller's own order
        (["_score", "_id"], None),  # relevance with a tiebreaker: the sort values a search_after page goes on from
        (None, "topic:asc,_id"),
    ],
)
def test_a_search_with_a_sort_of_its_own_keeps_opensearch_s_order_and_is_judged(
    make_answerbox: AnswerboxFactory,
    corpus: OpenSearch,
    client: httpx.Client,
    sort: list[Any] | None,
    param: str | None,
) -> None:
    url = make_answerbox()
    ext = {"generative_qa_parameters": {"llm_question": EVEREST_Q}}
    body = {"query": {"match_all": {}}, "search_pipeline": _pipeline(rerank=True, corrective=None), "ext": ext}
    params = {"sort": param} if param else {}
    sorted_body = {**body, "sort": sort} if sort else body
    direct = corpus.search(
        index="wiki", body={"query": {"match_all": {}}, **({"sort": sort} if sort else {})}, params=params
    )
    expected = [(h["_id"], h.get("sort")) for h in direct["hits"]["hits"]]
    assert expected[0][0] != "everest"
    response = client.post(f"{url}/wiki/_search", params=params, json=sorted_body)
    assert response.status_code == 200, response.text
    result = response.json()
    assert [(h["_id"], h.get("sort")) for h in result["hits"]["hits"]] == expected
    assert not any("_previous_score" in h for h in result["hits"]["hits"])
    retrieval = _retrieval(result)
    assert (retrieval["reranked"], retrieval["verdict"]) == (False, "correct")
    assert any("keep the caller's order" in w for w in result["ext"]["answerbox"]["warnings"])
    # With no sort of its own, the same search is reranked: the article that answers comes first.
    unsorted = _post(client, url, "wiki", body)
    assert _retrieval(unsorted)["reranked"] is True
    assert unsorted["hits"]["hits"][0]["_id"] == "everest"


def test_before_an_extractive_answer_knowledge_is_whole_passages_an_ambiguous_search_stops_and_the_plan_says_so(
    make_answerbox: AnswerboxFactory, corpus: OpenSearch, client: httpx.Client, llm: tuple[ScriptedLLM, str]
) -> None:
    url = make_answerbox(llm={"base_url": llm[1]})
    ext = {"generative_qa_parameters": {"llm_question": EVEREST_Q}}
    found = {}
    for mode in ("extractive", "generative"):
        # Never Correct nor Incorrect (the scores are a tanh): every search here is Ambiguous.
        pipeline = _pipeline(upper=1.0, lower=-1.0, corrective={"keywords": "question", "index": "news"})
        pipeline["response_processors"].append({"cited_answer": {"mode": mode, "check_citations": False}})
        body = {"query": {"match_all": {}}, "search_pipeline": pipeline, "ext": ext}
        response = client.post(
            f"{url}/wiki/_search", params={"verbose_pipeline": "true"}, json=body, headers={"Authorization": AUTH}
        )
        assert response.status_code == 200, response.text
        found[mode] = response.json()["ext"]["answerbox"]
    steps = {mode: report["plan"]["steps"][0] for mode, report in found.items()}
    assert {mode: step["values"]["refine"] for mode, step in steps.items()} == {
        "extractive": {"value": "passages", "source": "default"},
        "generative": {"value": "strips", "source": "default"},
    }
    # The reader goes on from the refined hits alone; an LLM writes from the corrective hits too.
    assert {mode: step["values"]["ambiguous"]["value"] for mode, step in steps.items()} == {
        "extractive": "refine",
        "generative": "refine+corrective_search",
    }
    retrieval = {mode: report["retrieval"] for mode, report in found.items()}
    assert {mode: (r["verdict"], r["action"]) for mode, r in retrieval.items()} == {
        "extractive": ("ambiguous", "refine"),
        "generative": ("ambiguous", "refine+corrective_search"),
    }
    assert retrieval["extractive"]["corrective"] is None
    assert retrieval["generative"]["corrective"]["index"] == "news"
    passages = found["extractive"]["retrieval"]["knowledge"]
    assert any(strip["_id"] == "everest" for strip in passages)
    _assert_exact_offsets(passages, corpus)
    texts = {d["_id"]: d["text"] for d in WIKI}
    assert all(strip["text"] == texts[strip["_id"]] for strip in passages)
    # CRAG's strips cut the same passages into groups of three sentences.
    cut = [s for s in found["generative"]["retrieval"]["knowledge"] if s["_index"] == "wiki"]
    assert any(strip["text"] != texts[strip["_id"]] for strip in cut)


@pytest.mark.real_llm
def test_real_llm_rewrites_the_question_for_the_corrective_search(
    make_answerbox: AnswerboxFactory, corpus: OpenSearch, client: httpx.Client, real_llm: tuple[RecordingProxy, str]
) -> None:
    recorder, llm_url = real_llm
    # A small CPU model can take tens of seconds per call on a busy machine.
    url = make_answerbox(
        llm={"base_url": llm_url, "timeout_s": 120}, limits={"processor_timeout_s": 300, "pipeline_budget_s": 300}
    )
    result = _search_all(client, url, "news", EVEREST_Q, _pipeline(corrective={"index": "wiki"}))
    retrieval = _retrieval(result)
    assert retrieval["verdict"] == "incorrect"
    (sent,) = completions(recorder)
    assert EVEREST_Q in sent["messages"][-1]["content"]
    corrective, warnings = retrieval["corrective"], result["ext"]["answerbox"]["warnings"]
    # Which words the model wrote differs between CPUs; that a corrective search ran with
    # one to three keywords, and that a fallback is named, does not.
    assert corrective["keywords_source"] in ("llm", "fallback")
    named = [w for w in warnings if "keyword rewrite used the question's own words" in w]
    assert bool(named) is (corrective["keywords_source"] == "fallback"), warnings
    assert 1 <= len(corrective["keywords"]) <= 3
    assert retrieval["corrective_query"] == " ".join(corrective["keywords"])


def _assert_scores_descend(hits: dict[str, Any]) -> list[float]:
    """OpenSearch's contract for a search nobody sorted: ``_score`` non-increasing, ``max_score`` the first."""
    scores: list[float] = [h["_score"] for h in hits["hits"]]
    assert scores, hits
    assert all(a >= b for a, b in pairwise(scores)), scores
    assert hits["max_score"] == scores[0]
    return scores


@pytest.mark.parametrize("first_pass", ["default", None])
def test_a_reranked_search_s_scores_descend_and_max_score_is_the_first_in_every_answer(
    make_answerbox: AnswerboxFactory,
    corpus: OpenSearch,
    client: httpx.Client,
    scripted_llm: tuple[ScriptedLLM, str],
    first_pass: str | None,
) -> None:
    """The embedded default pipeline over BM25 hits, on ``_search``, an ``_msearch`` line and the stream's
    ``hits`` event: with its first pass (which stops on the Everest article, so the rest are unread) and
    with every hit read (``first_pass: null``)."""
    bulk_index(corpus, "both", [dict(d) for d in WIKI + NEWS], MAPPINGS)
    url = make_answerbox(llm={"base_url": scripted_llm[1]})
    steps = json.loads(json.dumps(SAMPLE_PIPELINE["response_processors"]))
    if first_pass is None:
        steps[0]["retrieval_evaluator"]["first_pass"] = None
    pipeline = {**SAMPLE_PIPELINE, "response_processors": steps}
    body = {"query": {"match": {"text": EVEREST_Q}}, "search_pipeline": pipeline}
    found = _post(client, url, "both", body)
    scores = _assert_scores_descend(found["hits"])
    read = len(_retrieval(found)["scores"])
    assert len(scores) > 4
    assert read == (4 if first_pass else len(scores))
    if first_pass:  # the unread hits keep the engine's score beside their new one
        assert all("_previous_score" in h for h in found["hits"]["hits"][read:])
    lines = "\n".join(json.dumps(line) for line in ({"index": "both"}, body)) + "\n"
    msearch = client.post(f"{url}/_msearch", content=lines, headers={"content-type": "application/x-ndjson"})
    assert msearch.status_code == 200, msearch.text
    (answer,) = msearch.json()["responses"]
    assert _assert_scores_descend(answer["hits"]) == scores
    with client.stream("POST", f"{url}/both/_answerbox/stream", json=body) as response:
        assert response.status_code == 200
        events, name = [], ""
        for line in response.iter_lines():
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: ") and name == "hits":
                events.append(json.loads(line.removeprefix("data: ")))
    (ranked,) = events
    assert _assert_scores_descend(ranked["hits"]) == scores
