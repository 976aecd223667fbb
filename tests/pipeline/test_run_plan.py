"""The run plan over real HTTP: what a stored pipeline will do, each value with where it came
from (``GET /_search/pipeline/{id}?explain``), and a search's own plan with ``verbose_pipeline``,
where the search's ``generative_qa_parameters`` win over the pipeline."""

from __future__ import annotations

from typing import Any

import httpx
from answerbox.core.config import LLMSettings
from answerbox.core.shipped import shipped
from answerbox.models.manifest import ModelManifest
from opensearchpy import OpenSearch

from tests.support.books import QUESTION
from tests.support.scripted_llm import ScriptedLLM

OURS: list[dict[str, Any]] = [
    {"retrieval_evaluator": {"top_n": 5, "rerank": True, "lower": -0.6}},
    {"cited_answer": {"min_confidence": 0.3, "size": 4}},
]
PIPELINE = {"budget_s": 12, "response_processors": [*OURS, {"truncate_hits": {"target_size": 3}}]}


def values(plan: dict[str, Any], processor: str) -> dict[str, tuple[Any, str]]:
    step = next(s for s in plan["steps"] if s["processor"] == processor)
    return {name: (v["value"], v["source"]) for name, v in step["values"].items()}


def test_explain_names_where_each_value_of_a_stored_pipeline_comes_from(
    books: OpenSearch, generative: tuple[ScriptedLLM, str], client: httpx.Client
) -> None:
    _, url = generative
    assert client.put(f"{url}/_search/pipeline/answers", json=PIPELINE).status_code == 200
    plain = client.get(f"{url}/_search/pipeline/answers")
    assert plain.json() == {"answers": PIPELINE}  # OpenSearch's answer, unchanged without ?explain
    explained = client.get(f"{url}/_search/pipeline/answers?explain").json()["answers"]
    assert explained["pipeline"] == PIPELINE
    plan = explained["plan"]
    manifest = ModelManifest.load(shipped("model"))
    calibrator = manifest.answer_calibrator
    assert plan["budget_s"] == {"value": 12.0, "source": "pipeline"}
    assert plan["processor_timeout_s"]["source"] == "settings"
    assert (plan["llm_calls"]["source"], plan["render_cpu_s"]["source"]) == ("settings", "settings")
    assert plan["in_opensearch"] == ["truncate_hits"]
    # cited_answer weighs 2, the evaluator 1: a third and two thirds of the budget at the start.
    assert [(s["processor"], s["phase"], s["share"]) for s in plan["steps"]] == [
        ("retrieval_evaluator", "response", 0.3333),
        ("cited_answer", "response", 0.6667),
    ]
    assert values(plan, "retrieval_evaluator") == {
        "top_n": (5, "pipeline"),
        "first_pass": (4, "default"),
        "first_pass_stop": (manifest.crag_first_pass_stop, "manifest"),
        "rerank": (True, "pipeline"),
        "upper": (manifest.crag_upper, "manifest"),
        "lower": (-0.6, "pipeline"),
        "fusion_weight": (manifest.rerank_fusion_weight, "manifest"),
        "rewrite_llm_timeout_s": (LLMSettings().timeout_s, "settings"),
        "refine": ("strips", "default"),  # cited_answer in mode auto may write from them
        "ambiguous": ("refine+corrective_search", "default"),
    }
    assert values(plan, "cited_answer") == {
        "mode": ("auto", "default"),
        "prefer": ("confident", "default"),
        "min_confidence": (0.3, "pipeline"),
        "skip_llm_above": (calibrator.skip_llm_above, "manifest"),
        "size": (4, "pipeline"),
        "model": (LLMSettings().model, "settings"),
        "llm_timeout_s": (LLMSettings().timeout_s, "settings"),
    }


def test_the_chains_reader_constants_come_from_the_model_unless_the_pipeline_sets_them(
    books: OpenSearch, generative: tuple[ScriptedLLM, str], client: httpx.Client
) -> None:
    _, url = generative
    chain = {"response_processors": [{"chain_of_query": {"answer_margin": 0.5}}]}
    assert client.put(f"{url}/_search/pipeline/chain", json=chain).status_code == 200
    plan = client.get(f"{url}/_search/pipeline/chain?explain").json()["chain"]["plan"]
    manifest = ModelManifest.load(shipped("model"))
    found = values(plan, "chain_of_query")
    assert (found["theta"], found["answer_margin"]) == ((manifest.theta, "manifest"), (0.5, "pipeline"))


def test_a_verbose_search_carries_its_plan_and_the_request_wins(
    books: OpenSearch, generative: tuple[ScriptedLLM, str], client: httpx.Client
) -> None:
    scripted, url = generative
    scripted.replies = ["Frank Herbert wrote Dune [1]."]
    # osmem-server runs no processors of OpenSearch's own: this search's pipeline has none.
    ours = {**PIPELINE, "response_processors": OURS}
    assert client.put(f"{url}/_search/pipeline/answers", json=ours).status_code == 200
    body = {
        "query": {"match": {"text": QUESTION}},
        "ext": {"generative_qa_parameters": {"context_size": 2, "llm_model": "other-model", "timeout": 7}},
    }
    verbose = client.post(f"{url}/books/_search?search_pipeline=answers&verbose_pipeline=true", json=body).json()
    plan = verbose["ext"]["answerbox"]["plan"]
    assert plan["pipeline"] == "answers"
    assert values(plan, "cited_answer")["size"] == (2, "request")
    assert values(plan, "cited_answer")["model"] == ("other-model", "request")
    assert values(plan, "cited_answer")["min_confidence"] == (0.3, "pipeline")
    assert values(plan, "cited_answer")["llm_timeout_s"] == (7, "request")
    quiet = client.post(f"{url}/books/_search?search_pipeline=answers", json=body).json()
    assert "plan" not in quiet["ext"]["answerbox"]  # only when asked for
