"""Cost per search of the non-LLM answer box: two models, the same searches, the same run.

    PYTHONPATH=plugin:. python -m bench.search_cost --questions 200 --baseline-rev 92de7ee

Starts osmem-server with every SQuAD v1.1 dev paragraph and one answerbox per model (the
candidate, default ``onnx_models/default``, and the baseline: the same folder at git
revision ``--baseline-rev``, or ``--baseline DIR``). Each seeded question is sent to both,
alternating which goes first, one search at a time, through the pipeline a new user
writes: ``retrieval_evaluator`` (top 10, rerank) then ``cited_answer`` with no LLM (the
extractive featured snippet). Prints p50/p99 end to end for each model and the ratio
candidate/baseline, plus how often the answer holds a gold answer.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from answerbox.app import create_app
from answerbox.core.config import ModelSettings, Settings
from opensearchpy import OpenSearch
from osmem_server import OsmemServer

from bench.harness import REPO_ROOT, dev_paragraphs, index_paragraphs, quantile, serve
from onnx_models.data.squad import normalize_answer, sample_questions

PIPELINE = {
    "response_processors": [
        {"retrieval_evaluator": {"text_fields": ["text"], "top_n": 10, "rerank": True}},
        {"cited_answer": {"size": 5}},
    ]
}


def model_at_revision(revision: str, folder: str, target: Path) -> Path:
    """``folder`` (a model directory in this repository) as it was at ``revision``."""
    names = subprocess.run(
        ["git", "ls-tree", "--name-only", f"{revision}:{folder}"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    for name in names:
        blob = subprocess.run(
            ["git", "show", f"{revision}:{folder}/{name}"], cwd=REPO_ROOT, capture_output=True, check=True
        )
        (target / name).write_bytes(blob.stdout)
    return target


def _search(http: httpx.Client, url: str, question: str) -> tuple[float, str]:
    body = {"query": {"match": {"text": question}}, "size": 10, "search_pipeline": PIPELINE}
    started = time.perf_counter()
    response = http.post(f"{url}/squad/_search", json=body)
    millis = (time.perf_counter() - started) * 1000
    response.raise_for_status()
    answer = response.json()["ext"]["answerbox"]["answer"] or {}
    return millis, "" if answer.get("abstained") else answer.get("text") or ""


def bench(args: argparse.Namespace, baseline: Path) -> dict[str, Any]:
    paragraphs = dev_paragraphs()
    questions = sample_questions(paragraphs, args.questions, args.seed)
    models = {"baseline": baseline, "candidate": args.candidate}
    millis: dict[str, list[float]] = {name: [] for name in models}
    contains: dict[str, int] = {name: 0 for name in models}
    with OsmemServer.start(japanese=False) as server:
        index_paragraphs(OpenSearch(hosts=[server.url], timeout=120), "squad", paragraphs)
        urls: dict[str, str] = {}
        with serve(create_app(Settings.load(opensearch={"url": server.url}, models={"dir": str(baseline)}))) as urls[
            "baseline"
        ]:
            settings = Settings.load(opensearch={"url": server.url}, models={"dir": str(args.candidate)})
            with serve(create_app(settings)) as urls["candidate"], httpx.Client(timeout=300) as http:
                for name in models:  # loads each model before anything is timed
                    _search(http, urls[name], questions[0][1].text)
                for i, (_, question) in enumerate(questions):
                    order = list(models) if i % 2 else list(reversed(models))
                    for name in order:
                        took, text = _search(http, urls[name], question.text)
                        millis[name].append(took)
                        contains[name] += any(
                            normalize_answer(a) in normalize_answer(text)
                            for a in question.answers
                            if normalize_answer(a)
                        )
    summary: dict[str, Any] = {"questions": len(questions), "pipeline": PIPELINE}
    for name, path in models.items():
        summary[name] = {
            "model": str(path),
            "p50_ms": round(quantile(millis[name], 0.5), 1),
            "p99_ms": round(quantile(millis[name], 0.99), 1),
            "mean_ms": round(statistics.fmean(millis[name]), 1),
            "answer_contains_gold": round(contains[name] / len(questions), 4),
        }
    summary["p50_ratio_candidate_to_baseline"] = round(
        summary["candidate"]["p50_ms"] / summary["baseline"]["p50_ms"], 3
    )
    return summary


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--seed", type=int, default=2025)
    parser.add_argument("--candidate", type=Path, default=ModelSettings().dir)
    baseline = parser.add_mutually_exclusive_group(required=True)
    baseline.add_argument("--baseline", type=Path, help="a model directory")
    baseline.add_argument("--baseline-rev", help="git revision of onnx_models/default to compare with")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.baseline or model_at_revision(args.baseline_rev, "onnx_models/default", Path(tmp))
        print(json.dumps(bench(args, path), indent=2))


if __name__ == "__main__":
    main()
