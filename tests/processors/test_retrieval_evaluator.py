"""retrieval_evaluator (CRAG): verdicts, refinement, corrective search, rerank and drop, through real HTTP.

answerbox runs under uvicorn in front of osmem-server with the shipped ONNX evaluator;
the keyword rewrite goes to a scripted LLM (or the real one, in the ``real_llm`` test).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from answerbox.config import ModelSettings
from answerbox.models.manifest import ModelManifest
from opensearchpy import OpenSearch

from tests.conftest import AnswerboxFactory, bulk_index, completions
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

CORRECT_Q = "Which engineer's company designed and built the Eiffel Tower?"
EVEREST_Q = "When was the first recorded ascent of Mount Everest?"
NILE_Q = "How many countries does the Nile cross?"
# The verdict tests pin the thresholds so they test CRAG's rules, not one calibration
# (the manifest's change with every retrain; test_thresholds_default_to_the_manifest
# checks they are used). On the calibrated 2P-1 scale the shipped model puts the fixtures'
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


def _search(
    client: httpx.Client, url: str, index: str, question: str, pipeline: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    return _post(client, url, index, {"query": {"match": {"text": question}}, "search_pipeline": pipeline, **extra})


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


def test_correct_verdict_refines_the_hits_into_cited_strips(
    make_answerbox: AnswerboxFactory, corpus: OpenSearch, client: httpx.Client, llm: tuple[ScriptedLLM, str]
) -> None:
    scripted, llm_url = llm
    url = make_answerbox(llm={"base_url": llm_url})
    result = _search(client, url, "wiki", CORRECT_Q, _pipeline(strips_top_k=2))
    retrieval = _retrieval(result)
    assert retrieval["verdict"] == "correct"
    assert retrieval["action"] == "refine"
    scores = {s["_id"]: s["score"] for s in retrieval["scores"]}
    assert set(scores) == {h["_id"] for h in result["hits"]["hits"]}
    assert scores["eiffel"] >= retrieval["upper"]
    knowledge = retrieval["knowledge"]
    assert 1 <= len(knowledge) <= 2
    assert any("Gustave Eiffel" in strip["text"] for strip in knowledge)
    assert all(strip["_id"] == "eiffel" for strip in knowledge)
    # Kept strips come back in document order, with offsets that give back their exact text.
    assert [s["start"] for s in knowledge] == sorted(s["start"] for s in knowledge)
    _assert_exact_offsets(knowledge, corpus)
    assert retrieval["corrective_query"] is None
    assert scripted.calls == []


def test_incorrect_verdict_discards_hits_and_searches_elsewhere_as_the_caller(
    make_answerbox: AnswerboxFactory,
    corpus: OpenSearch,
    osmem_url: str,
    client: httpx.Client,
    llm: tuple[ScriptedLLM, str],
) -> None:
    scripted, llm_url = llm
    recorder = RecordingProxy(osmem_url)
    with serve(recorder.app()) as hop:
        url = make_answerbox(opensearch={"url": hop}, llm={"base_url": llm_url})
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
    }


@pytest.mark.parametrize(
    ("behaviour", "limits"),
    [
        ({"fail": True}, {}),
        # Slower than half the processor's budget: the rewrite gives up, the processor does not time out.
        ({"replies": ["Mount Everest"], "delay_s": 10}, {"processor_timeout_s": 16}),
    ],
    ids=["llm-error", "llm-too-slow"],
)
def test_llm_down_during_rewrite_still_runs_the_corrective_search(
    make_answerbox: AnswerboxFactory,
    corpus: OpenSearch,
    client: httpx.Client,
    behaviour: dict[str, Any],
    limits: dict[str, float],
) -> None:
    failing = ScriptedLLM(**behaviour)
    with serve(failing.app()) as llm_url:
        url = make_answerbox(llm={"base_url": f"{llm_url}/v1"}, limits=limits)
        # Loads the model first, so the timed search spends its budget on the LLM alone.
        _search(client, url, "wiki", CORRECT_Q, _pipeline())
        result = _search_all(client, url, "news", EVEREST_Q, _pipeline(corrective={"index": "wiki", "fuzziness": None}))
    retrieval = _retrieval(result)
    assert len(failing.calls) == 1
    assert retrieval["verdict"] == "incorrect"
    assert retrieval["corrective"]["keywords_source"] == "fallback"
    assert retrieval["corrective_query"] == "first recorded ascent Mount Everest"
    assert any(s["_id"] == "everest" for s in retrieval["corrective"]["scores"])
    assert any(s["_id"] == "everest" and "1953" in s["text"] for s in retrieval["knowledge"])
    assert any("keyword rewrite" in w for w in result["ext"]["answerbox"]["warnings"])


def test_ambiguous_verdict_keeps_both_sets_without_duplicates(
    make_answerbox: AnswerboxFactory, corpus: OpenSearch, client: httpx.Client, llm: tuple[ScriptedLLM, str]
) -> None:
    scripted, llm_url = llm
    scripted.replies = ["Nile, countries, cross"]
    url = make_answerbox(llm={"base_url": llm_url})
    # An upper above every fixture's score makes the Nile passage ambiguous, whatever the model.
    # Every passage is refined (lower -1) and every strip kept, so the knowledge shows both sets whole.
    pipeline = _pipeline(top_n=1, strip_threshold=-1.0, strips_top_k=20, upper=0.95, lower=-1.0)
    result = _search(client, url, "wiki", NILE_Q, pipeline, size=1)
    retrieval = _retrieval(result)
    assert retrieval["verdict"] == "ambiguous"
    assert [s["_id"] for s in retrieval["scores"]] == ["nile"]
    assert retrieval["action"] == "refine+corrective_search"
    assert retrieval["corrective_query"] == "Nile countries cross"
    # The corrective search on the same index finds the Nile again (left out) and, through
    # fuzziness ("across"), Everest.
    corrective = [s["_id"] for s in retrieval["corrective"]["scores"]]
    assert "everest" in corrective
    assert "nile" not in corrective
    knowledge = [(s["_id"], s["start"]) for s in retrieval["knowledge"]]
    assert {doc for doc, _ in knowledge} == {"nile", *corrective}
    assert knowledge[0][0] == "nile"
    assert len(set(knowledge)) == len(knowledge)
    _assert_exact_offsets(retrieval["knowledge"], corpus)


def test_only_the_best_passages_at_or_above_lower_are_refined(
    make_answerbox: AnswerboxFactory, corpus: OpenSearch, client: httpx.Client
) -> None:
    # Every wiki document is judged; strips of any score would be kept, but only the passages
    # the evaluator did not rule out are cut into strips, and at most strips_top_k of them.
    url = make_answerbox()
    pipeline = _pipeline(strip_threshold=-1.0, strips_top_k=20, corrective=None)
    retrieval = _retrieval(_search_all(client, url, "wiki", CORRECT_Q, pipeline))
    scores = {s["_id"]: s["score"] for s in retrieval["scores"]}
    refined = {s["_id"] for s in retrieval["knowledge"]}
    assert "eiffel" in refined
    assert refined == {doc for doc, score in scores.items() if score >= VERDICT_THRESHOLDS["lower"]}
    assert len(refined) < len(scores)
    one = _retrieval(
        _search_all(
            client, url, "wiki", CORRECT_Q, _pipeline(strip_threshold=-1.0, strips_top_k=1, lower=-1.0, corrective=None)
        )
    )
    assert {s["_id"] for s in one["knowledge"]} == {"eiffel"}


def test_thresholds_default_to_the_manifest(
    make_answerbox: AnswerboxFactory, corpus: OpenSearch, client: httpx.Client
) -> None:
    manifest = json.loads((ModelSettings().dir / "manifest.json").read_text())
    url = make_answerbox()
    pipeline = {
        "response_processors": [{"retrieval_evaluator": {"text_fields": ["text"], "upper": 0.99, "corrective": None}}]
    }
    retrieval = _retrieval(_search(client, url, "wiki", CORRECT_Q, pipeline))
    assert (retrieval["upper"], retrieval["lower"]) == (0.99, manifest["crag_lower"])
    scores = [s["score"] for s in retrieval["scores"]]
    expected = "incorrect" if max(scores) < manifest["crag_lower"] else "ambiguous"
    assert max(scores) < 0.99
    assert retrieval["verdict"] == expected


ELEVATION_Q = "What is the elevation of Mount Everest?"


@pytest.fixture
def stuffed(corpus: OpenSearch) -> list[dict[str, Any]]:
    """A passage BM25 puts first for ELEVATION_Q (short and full of its words) that answers
    nothing; returns the engine's own hits for the question."""
    # Far below the Everest article in the evaluator's eyes (about 0.1 against 0.6): int8 scores
    # move a few hundredths with what shares their batch, so a close pair would flip.
    text = "The Everest elevation club meets on Mondays; members of the Mount Everest elevation club like tea."
    corpus.index(index="wiki", id="stuffed", body={"text": text}, refresh=True)
    direct: list[dict[str, Any]] = corpus.search(index="wiki", body={"query": {"match": {"text": ELEVATION_Q}}})[
        "hits"
    ]["hits"]
    assert direct[0]["_id"] == "stuffed"
    return direct


def _rerank(
    client: httpx.Client, url: str, **config: Any
) -> tuple[list[dict[str, Any]], dict[str, float], dict[str, Any]]:
    """Hits reranked for ELEVATION_Q, the evaluator's scores by id, and the whole response."""
    result = _search(client, url, "wiki", ELEVATION_Q, _pipeline(rerank=True, corrective=None, **config))
    return result["hits"]["hits"], {s["_id"]: s["score"] for s in _retrieval(result)["scores"]}, result


def _shares(direct: list[dict[str, Any]]) -> dict[str, float]:
    """The fusion's engine term: each hit's score over the best one's."""
    return {h["_id"]: h["_score"] / direct[0]["_score"] for h in direct}


def test_rerank_with_fusion_weight_0_orders_hits_by_evaluator_score_and_keeps_the_old_score(
    make_answerbox: AnswerboxFactory, stuffed: list[dict[str, Any]], client: httpx.Client
) -> None:
    hits, scores, result = _rerank(client, make_answerbox(), fusion_weight=0)
    assert hits[0]["_id"] == "everest"
    assert [h["_id"] for h in hits] == sorted(scores, key=lambda doc: -scores[doc])
    assert [h["_score"] for h in hits] == sorted((h["_score"] for h in hits), reverse=True)
    assert result["hits"]["max_score"] == hits[0]["_score"]
    previous = {h["_id"]: h["_score"] for h in stuffed}
    for hit in hits:
        assert hit["_score"] == pytest.approx(scores[hit["_id"]], abs=1e-4)
        assert hit["_previous_score"] == pytest.approx(previous[hit["_id"]])
    assert "_previous_score" not in hits[0]["_source"]


def test_rerank_fuses_the_evaluator_score_with_the_engines_share_of_its_best_score(
    make_answerbox: AnswerboxFactory, stuffed: list[dict[str, Any]], client: httpx.Client
) -> None:
    url = make_answerbox()
    alone, scores, _ = _rerank(client, url, fusion_weight=0)
    share = _shares(stuffed)
    assert alone[0]["_id"] == "everest"
    assert share["everest"] < 1
    # Just enough weight for BM25's favourite to pass the evaluator's, whatever the model's scores.
    weight = round(1.5 * (scores["everest"] - scores["stuffed"]) / (1 - share["everest"]), 3)
    hits, fused_run_scores, result = _rerank(client, url, fusion_weight=weight)
    assert hits[0]["_id"] == "stuffed"
    engine = {h["_id"]: h["_score"] for h in stuffed}
    for hit in hits:
        assert hit["_score"] == pytest.approx(scores[hit["_id"]] + weight * share[hit["_id"]], abs=1e-3)
        assert hit["_previous_score"] == pytest.approx(engine[hit["_id"]])
    assert [h["_score"] for h in hits] == sorted((h["_score"] for h in hits), reverse=True)
    assert result["hits"]["max_score"] == hits[0]["_score"]
    # The verdict and the reported scores stay the evaluator's.
    assert fused_run_scores == pytest.approx(scores, abs=1e-3)
    assert _retrieval(result)["verdict"] == "correct"


def test_fusion_weight_defaults_to_the_manifests(
    make_answerbox: AnswerboxFactory, stuffed: list[dict[str, Any]], client: httpx.Client, tmp_path: Path
) -> None:
    shipped = ModelSettings().dir
    manifest = ModelManifest.load(shipped)
    for name in (manifest.tokenizer, *manifest.variants.values()):
        (tmp_path / name).symlink_to((shipped / name).resolve())
    manifest.replace(rerank_fusion_weight=0.25).save(tmp_path)
    hits, scores, _ = _rerank(client, make_answerbox(models={"dir": str(tmp_path)}))
    share = _shares(stuffed)
    for hit in hits:
        assert hit["_score"] == pytest.approx(scores[hit["_id"]] + 0.25 * share[hit["_id"]], abs=1e-3)


def test_drop_removes_hits_below_the_lower_threshold(
    make_answerbox: AnswerboxFactory, corpus: OpenSearch, client: httpx.Client
) -> None:
    url = make_answerbox()
    question = "How long is the Nile river in Africa?"
    undropped = _retrieval(_search(client, url, "wiki", question, _pipeline(corrective=None)))
    result = _search(client, url, "wiki", question, _pipeline(corrective=None, drop_below_lower=True))
    retrieval = _retrieval(result)
    below = {s["_id"] for s in undropped["scores"] if s["score"] < undropped["lower"]}
    assert below, undropped["scores"]
    assert retrieval["dropped"] == len(below)
    assert {h["_id"] for h in result["hits"]["hits"]} == {s["_id"] for s in undropped["scores"]} - below
    assert "nile" in {h["_id"] for h in result["hits"]["hits"]}


def test_corrective_search_keeps_the_callers_filters(
    make_answerbox: AnswerboxFactory,
    corpus: OpenSearch,
    osmem_url: str,
    client: httpx.Client,
    llm: tuple[ScriptedLLM, str],
) -> None:
    _, llm_url = llm
    recorder = RecordingProxy(osmem_url)
    body = {
        "query": {"bool": {"must": [{"match": {"text": EVEREST_Q}}], "filter": [{"term": {"topic": "biology"}}]}},
        # upper 1 and lower 1: no score reaches upper, every score is below lower.
        "search_pipeline": _pipeline(upper=1.0, lower=1.0),
    }
    with serve(recorder.app()) as hop:
        url = make_answerbox(opensearch={"url": hop}, llm={"base_url": llm_url})
        retrieval = _retrieval(_post(client, url, "wiki", body))
    assert (retrieval["verdict"], retrieval["upper"], retrieval["lower"]) == ("incorrect", 1.0, 1.0)
    corrective = json.loads(recorder.matching("/_search")[1].body)
    assert corrective["query"]["bool"]["filter"] == [{"term": {"topic": "biology"}}]
    # Without the filter the corrective query finds Everest; with it only photosynthesis
    # qualifies, and it was already judged.
    assert retrieval["corrective"]["scores"] == []
    unfiltered = corpus.search(index="wiki", body={"query": {"match": {"text": retrieval["corrective_query"]}}})
    assert "everest" in {h["_id"] for h in unfiltered["hits"]["hits"]}


def test_evaluator_failure_leaves_the_hits_as_opensearch_returned_them(
    make_answerbox: AnswerboxFactory, corpus: OpenSearch, client: httpx.Client, tmp_path: Any
) -> None:
    url = make_answerbox(models={"dir": str(tmp_path)})
    result = _search(client, url, "wiki", EVEREST_Q, _pipeline(rerank=True, drop_below_lower=True))
    direct = corpus.search(index="wiki", body={"query": {"match": {"text": EVEREST_Q}}})
    assert result["hits"] == direct["hits"]
    assert result["ext"]["answerbox"]["retrieval"] is None
    assert any("retrieval evaluator failed" in w for w in result["ext"]["answerbox"]["warnings"])


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"upper": 0.2, "lower": 0.5}, "must not be above upper"),
        ({"corrective": {"fuzziness": "lots"}}, "fuzziness"),
        ({"top_n": 0}, "top_n"),
        ({"fusion_weight": -0.5}, "fusion_weight"),
        ({"corrective": {"prompt": "{{ question "}}, "syntax error"),
    ],
)
def test_invalid_config_is_rejected_when_the_pipeline_is_put(
    answerbox: str, client: httpx.Client, config: dict[str, Any], problem: str
) -> None:
    response = client.put(f"{answerbox}/_search/pipeline/crag", json=_pipeline(**config))
    assert response.status_code == 400
    assert problem in response.json()["error"]["reason"]


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
