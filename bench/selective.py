"""Selective answering on SQuAD v1.1 dev: how often the box answers, how often it is right when it
does, how well ``answer.confidence`` is calibrated, and what it answers when the answer is not there.

All 2,067 dev paragraphs go into osmem-server (index ``squad``), and again without the sampled
questions' gold paragraphs (``squad-removed``: no right answer exists, unless another paragraph
holds it). Each question runs through answerbox over HTTP (``_search``), per pipeline:

- ``extractive``: ``retrieval_evaluator`` top 10 with rerank, then ``cited_answer``, served by an
  answerbox with no LLM configured (so CRAG's keyword rewrite takes the question's own words, as
  in the calibrator's fit; the other pipelines' answerbox has the local LLM);
- ``embedded``: the embedded default's pipeline (``answerbox.ops.embedded.SAMPLE_PIPELINE``), local LLM;
- ``readme``: the README's admin pipeline, local LLM;
- ``embedded-before`` / ``readme-before``: those two as they were before answers had a
  confidence (q2d expansion; the LLM always asked and its held-up answer always kept; no
  confidence gate). The extractive pipeline's *before* is its own run counted ungated: every
  candidate an answer.

*Right*: the answer contains a gold answer (SQuAD normalisation). Per pipeline it prints the
share answered and the precision when answering (as configured: ``min_confidence`` from the
model), contains-gold over all questions, coverage at 80/85/90% precision and AURC (answers
ranked by confidence, candidates included), ECE over 10 bins with the mean confidence beside
the share right, the ECE an index correction (``answerbox threshold``'s) fitted on 100 or 300
of the answers leaves on the others, the share answered (and answered wrong) over
``squad-removed``, and the p50 of a search. Rows go to
``$ANSWERBOX_BENCH_DIR/selective/<pipeline>-<index>.jsonl`` so a run resumes.

    PYTHONPATH=plugin:. python -m bench.selective --sample 300 --llm-sample 100 --before-sample 50
"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from answerbox.app import create_app
from answerbox.core.config import Settings
from answerbox.ops.embedded import SAMPLE_PIPELINE, local_llm
from answerbox.ops.thresholds import ece, fit_recalibration, lowest_threshold
from osmem_server import OsmemServer

from bench.harness import (
    BENCH_DIR,
    SQUAD_INDEX,
    dev_paragraphs,
    free_port,
    match_body,
    quantile,
    readme_pipeline,
    serve,
)
from onnx_models.calibrate.answer_confidence import answer_of, aurc
from onnx_models.data.squad import Question, contains_gold, index_with_titles, sample_questions
from onnx_models.evaluate.rows import load_rows, resume

REMOVED_INDEX = "squad-removed"
EXTRACTIVE: dict[str, Any] = {
    "response_processors": [
        {"retrieval_evaluator": {"top_n": 10, "rerank": True}},
        {"cited_answer": {"size": 5, "mode": "extractive"}},
    ]
}
# What answers were before they had a confidence: the LLM always asked, its held-up answer kept.
_UNGATED = {"min_confidence": 0, "skip_llm_above": 1, "prefer": "generative"}
_Q2D = {"llm_query_expansion": {"tag": "expand", "method": "q2d", "mode": "zs", "max_tokens": 64}}


def _before(pipeline: dict[str, Any]) -> dict[str, Any]:
    before = copy.deepcopy(pipeline)
    if not before.get("request_processors"):
        before["request_processors"] = [_Q2D]
    for processor in before["response_processors"]:
        for name, config in processor.items():
            if name == "cited_answer":
                config.update(_UNGATED)
            elif name == "chain_of_query":
                config["skip_llm_above"] = 1
    return before


def pipelines() -> dict[str, dict[str, Any]]:
    readme = readme_pipeline()
    return {
        "extractive": EXTRACTIVE,
        "embedded": SAMPLE_PIPELINE,
        "readme": readme,
        "embedded-before": _before(SAMPLE_PIPELINE),
        "readme-before": _before(readme),
    }


def _rows_path(name: str, index: str) -> Path:
    return BENCH_DIR / "selective" / f"{name}-{index}.jsonl"


def _row(question: Question, answer: dict[str, Any] | None, seconds: float) -> dict[str, Any]:
    answer = answer or {"abstained": True}
    candidate = answer.get("candidate")
    shown = None if answer.get("abstained") else answer
    best = shown or candidate  # the ungated answer
    return {
        "id": question.id,
        "answered": shown is not None,
        "right": shown is not None and contains_gold(shown["text"], question.answers),
        "confidence": (best or {}).get("confidence"),
        "best_right": best is not None and contains_gold(best["text"], question.answers),
        "reason": answer.get("reason"),
        "llm": answer.get("llm"),
        "mode": (best or {}).get("mode"),
        "seconds": round(seconds, 4),
    }


def _run(client: httpx.Client, url: str, name: str, index: str, questions: Sequence[Question]) -> list[dict[str, Any]]:
    return resume(
        _rows_path(name, index),
        questions,
        lambda q: _row(q, *answer_of(client, url, index, q.text, pipeline=name)),
        label=f"{name} over {index}",
    )


def coverage_at(rows: Sequence[dict[str, Any]], precision: float) -> float:
    """The largest share of questions answered, best confidence first, right ``precision`` of the
    time or more (the point estimate); a question with no candidate is never answered."""
    scored = [r for r in rows if r["confidence"] is not None]
    confidence = [r["confidence"] for r in scored]
    right = [r["best_right"] for r in scored]
    threshold = lowest_threshold(confidence, right, precision, z=0.0, min_answered=1)
    return sum(c >= threshold for c in confidence) / len(rows) if threshold < 1.0 else 0.0


def rows_aurc(rows: Sequence[dict[str, Any]]) -> float:
    """AURC over the questions; one with no candidate at all is answered last, and wrong."""
    return aurc(
        [r["confidence"] if r["confidence"] is not None else -1.0 for r in rows], [r["best_right"] for r in rows]
    )


def chance_ece(confidence: Sequence[float], draws: int = 1000, seed: int = 0) -> float:
    """The ECE a perfectly calibrated confidence shows on this many questions, by chance alone:
    the mean over ``draws`` outcomes drawn right with probability ``confidence``. A measured
    ECE near it is as good as these questions can tell."""
    rng = np.random.default_rng(seed)
    p = np.asarray(confidence, dtype=float)
    return float(np.mean([ece(list(p), list(rng.random(len(p)) < p)) for _ in range(draws)]))


def corrected_ece(scored: Sequence[dict[str, Any]], fitted_on: int, splits: int = 20) -> tuple[float, float]:
    """The ECE of the other answers before and after the index correction ``answerbox
    threshold`` fits on ``fitted_on`` of them, the mean over ``splits`` seeded random splits."""
    before, after = [], []
    for seed in range(splits):
        order = np.random.default_rng(seed).permutation(len(scored))
        fit, rest = [scored[i] for i in order[:fitted_on]], [scored[i] for i in order[fitted_on:]]
        correction = fit_recalibration([r["confidence"] for r in fit], [r["best_right"] for r in fit])
        right = [r["best_right"] for r in rest]
        before.append(ece([r["confidence"] for r in rest], right))
        after.append(ece([correction(r["confidence"]) for r in rest], right))
    return float(np.mean(before)), float(np.mean(after))


def _mean_said(scored: Sequence[dict[str, Any]]) -> str:
    """The mean confidence beside the share right: which way the confidence is off."""
    return (
        f"mean confidence {np.mean([r['confidence'] for r in scored]):.3f}, "
        f"right {np.mean([r['best_right'] for r in scored]):.3f}"
    )


def _share(flags: Sequence[bool]) -> str:
    return f"{100 * sum(flags) / len(flags):5.1f}%" if flags else "  n/a"


def report(name: str, rows: list[dict[str, Any]], removed: list[dict[str, Any]], *, ungated: bool = False) -> None:
    answered = [r for r in rows if (r["confidence"] is not None if ungated else r["answered"])]
    right = [r["best_right"] if ungated else r["right"] for r in answered]
    scored = [r for r in rows if r["confidence"] is not None]
    print(f"\n== {name}: {len(rows)} questions ==")
    print(
        f"answered {_share([True] * len(answered) + [False] * (len(rows) - len(answered)))}, right when "
        f"answering {_share(right)}"
    )
    print(f"contains gold, all questions: {_share(right + [False] * (len(rows) - len(answered)))}")
    cover = "  ".join(f"@{int(p * 100)}%: {100 * coverage_at(rows, p):5.1f}%" for p in (0.8, 0.85, 0.9))
    print(f"coverage at precision {cover}; AURC {rows_aurc(rows):.4f}")
    if scored:
        confidence = [r["confidence"] for r in scored]
        print(
            f"ECE (10 bins, {len(scored)} with a confidence): "
            f"{ece(confidence, [r['best_right'] for r in scored]):.4f} (perfectly calibrated, by chance: "
            f"{chance_ece(confidence):.4f})"
        )
        print(f"  {_mean_said(scored)}")
        for fitted_on in (100, 300):
            if len(scored) >= fitted_on + 100:
                before, after = corrected_ece(scored, fitted_on)
                print(
                    f"  an index correction fitted on {fitted_on} of them: ECE of the rest {before:.4f} -> "
                    f"{after:.4f} (mean of 20 splits)"
                )
    if removed:
        gone = [r["confidence"] is not None if ungated else r["answered"] for r in removed]
        wrong = [g and not (r["best_right"] if ungated else r["right"]) for g, r in zip(gone, removed, strict=True)]
        print(f"gold paragraphs removed ({len(removed)}): answered {_share(gone)}, answered wrong {_share(wrong)}")
        said_there = [r for r in removed if r["confidence"] is not None]
        if said_there:
            print(f"  with a confidence there ({len(said_there)}): {_mean_said(said_there)}")
        both = [r for r in [*rows, *removed] if r["confidence"] is not None]
        print(
            f"ECE over both indices ({len(both)} with a confidence): "
            f"{ece([r['confidence'] for r in both], [r['best_right'] for r in both]):.4f}"
        )
    llm = {k: sum(r["llm"] == k for r in rows) for k in ("skipped", "used", "failed")}
    print(
        f"LLM: {llm}; p50 {1000 * quantile([r['seconds'] for r in rows], 0.5):.0f} ms, p95 "
        f"{1000 * quantile([r['seconds'] for r in rows], 0.95):.0f} ms"
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=300)
    parser.add_argument(
        "--llm-sample", type=int, default=100, help="questions (the sample's first) for the pipelines with an LLM"
    )
    parser.add_argument(
        "--before-sample", type=int, default=50, help="questions (the sample's first) for the *-before pipelines"
    )
    parser.add_argument("--seed", type=int, default=2023)
    parser.add_argument("--pipelines", nargs="+", default=list(pipelines()), choices=list(pipelines()))
    parser.add_argument(
        "--removed", nargs="*", default=["extractive", "embedded"], help="pipelines also run over squad-removed"
    )
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args(argv)

    paragraphs = dev_paragraphs()
    sample = sample_questions(paragraphs, args.sample, args.seed)
    print(f"{len(paragraphs)} paragraphs; {len(sample)} questions (seed {args.seed}); {vars(args)}", flush=True)
    by_pipeline = pipelines()

    def questions(name: str) -> list[Question]:
        size = (
            len(sample) if name == "extractive" else args.before_sample if name.endswith("-before") else args.llm_sample
        )
        return [q for _, q in sample[:size]]

    if not args.report_only:
        gone = {p.id for p, _ in sample}
        with ExitStack() as stack, httpx.Client(timeout=600) as client:
            osmem = stack.enter_context(OsmemServer.start(japanese=False))
            index_with_titles(client, osmem.url, paragraphs, SQUAD_INDEX)
            index_with_titles(client, osmem.url, [p for p in paragraphs if p.id not in gone], REMOVED_INDEX)
            served: dict[bool, str] = {}

            def answerbox(with_llm: bool) -> str:
                """answerbox's URL, with the local LLM or with none configured (started once each)."""
                if with_llm not in served:
                    llm: dict[str, Any] = {}
                    if with_llm:
                        llm = {"base_url": stack.enter_context(local_llm(free_port())), "model": "smollm2"}
                    app = create_app(Settings.load(opensearch={"url": osmem.url}, llm=llm))
                    served[with_llm] = stack.enter_context(serve(app))
                return served[with_llm]

            for name in args.pipelines:
                # "No LLM" is a property of the deployment, not only of cited_answer: with one
                # configured, CRAG's keyword rewrite would ask it (the fit's rows had none).
                url = answerbox(with_llm=name != "extractive")
                client.put(f"{url}/_search/pipeline/{name}", json=by_pipeline[name]).raise_for_status()
                client.post(
                    f"{url}/{SQUAD_INDEX}/_search", params={"search_pipeline": name}, json=match_body("warm up")
                )
                _run(client, url, name, SQUAD_INDEX, questions(name))
                if name in args.removed:
                    _run(client, url, name, REMOVED_INDEX, questions(name))
    extractive = load_rows(_rows_path("extractive", SQUAD_INDEX))
    for name in args.pipelines:
        asked = {q.id for q in questions(name)}
        rows = [r for i, r in load_rows(_rows_path(name, SQUAD_INDEX)).items() if i in asked]
        removed = [r for i, r in load_rows(_rows_path(name, REMOVED_INDEX)).items() if i in asked]
        if not rows:
            continue
        if name == "extractive":
            report("extractive-before (every candidate an answer)", rows, removed, ungated=True)
        report(name, rows, removed)
        # The bar for a pipeline with an LLM: as often right as the reader alone.
        shared = [r for r in rows if r["id"] in extractive]
        if name != "extractive" and shared:
            alone = _share([extractive[r["id"]]["right"] for r in shared])
            print(
                f"contains gold on the {len(shared)} questions extractive also ran: "
                f"{_share([r['right'] for r in shared])}, extractive {alone}"
            )


if __name__ == "__main__":
    main()
