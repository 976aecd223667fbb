"""Fit ``answer.confidence``'s calibrator with the pipeline in the loop; write it to manifest.json as
``answer_confidence``.

    PYTHONPATH=plugin:. python -m onnx_models.calibrate.answer_confidence --questions 2269 --llm-questions 150

(2,269 of the 2,270 held-out questions: a seeded sample, whose first 600 and 150 are a smaller
run's, so that rows already collected are reused; 2,270 would take them all in file order.)

*Right* is what every bench measures: the answer's text contains a gold answer (SQuAD
normalisation). The questions are a seeded sample of the held-out training articles
(squad_shifts new_wiki + nyt, the ``--holdout`` articles ``onnx_models.train.reader`` left out);
SQuAD dev and the other-domain files are never read here (they are for reporting). Every
paragraph of both files goes into osmem-server, and each question runs through answerbox
over HTTP, as a search-bar client sends it, with the extractive pipeline
(``retrieval_evaluator`` top 10 with rerank, then ``cited_answer``, ``min_confidence`` 0 so
that every answer shows its candidate):

1. *answerable*: every sampled question over the full index;
2. *removed*: ``--removed-share`` of them again over an index without their gold paragraphs,
   so that "the answer is not here" is learned (an answer that another paragraph holds still
   counts as right);
3. *generative* (``--llm-questions``; the local LLM, or yours with ``--llm-url``):
   ``cited_answer`` in generative mode on answerable questions: the LLM's checked answer and
   what its confidence rests on. An admin with a stronger LLM refits with it, so that
   ``skip_llm_above`` says where *that* LLM pays.

Each kind of answer gets an L2-regularised logistic regression over the signals the response
shows in ``answer.signals`` (``answerbox.models.confidence`` turns them into features).
Five-fold cross-validated probabilities choose the thresholds:

- ``min_confidence``: the lowest at which the answered share of the *answerable* questions is
  right ``--precision`` of the time (85%), by the one-sided 95% Wilson lower bound (``--z``):
  the lowest threshold that meets a target is where chance flattered the sample. The removed
  questions teach the calibrator but do not choose the threshold: their share in the pool is
  ``--removed-share``'s, so a threshold chosen on the pool would tighten with it. What it
  leaves answered over the removed index is recorded beside it (``removed_answered``);
- ``skip_llm_above``: the lowest snippet confidence above which the LLM, asked, would add
  no right answer in ``auto`` (its answer replaces the snippet only when more confident);
  with no LLM rows it stays 1 (the LLM is always asked).

The record (``calibration.answer_confidence``) also says what a shift of domain costs: the
snippet model fitted on one training file and applied to the other (``across_files``); and how
far the pooled fit is off on each kind of question (``by_kind``).

The pipeline serves ``--model-dir``'s ``--variant``, the model the fit is written to. Rows are kept in
``$ANSWERBOX_DATA_DIR/answer_confidence/KEY/*.jsonl``, KEY a digest of that model and of the
constants that shaped them (``rows_dir``), so a run resumes and another model starts afresh;
``--dry-run`` prints what it would write (the fit's record goes to ``calibration``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import random
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt
from answerbox.app import create_app
from answerbox.core.config import ModelSettings, Settings
from answerbox.models.confidence import SNIPPET_FEATURES, GenerativeSignals, SnippetSignals
from answerbox.models.manifest import ModelManifest
from answerbox.ops.embedded import local_llm
from answerbox.ops.thresholds import answered_at, ece, lowest_threshold
from answerbox.server import free_port, serve_in_thread

from onnx_models.data.squad import (
    TRAIN_FILES,
    Question,
    contains_gold,
    data_dir,
    held_out,
    holdout_fraction,
    index_with_titles,
    load_squad,
    sample_questions,
)
from onnx_models.evaluate.rows import Row, resume

log = logging.getLogger("answerbox.answer_confidence")

PIPELINE_ID = "fit"


def pipeline(mode: str) -> dict[str, Any]:
    """The extractive pipeline of the fit and of ``bench/selective.py``, in ``mode``."""
    answer = {"size": 5, "mode": mode, "min_confidence": 0, "skip_llm_above": 1}
    return {"response_processors": [{"retrieval_evaluator": {"top_n": 10, "rerank": True}}, {"cited_answer": answer}]}


def answer_of(
    client: httpx.Client, url: str, index: str, question: str, pipeline: str = PIPELINE_ID
) -> tuple[dict[str, Any], float]:
    """``ext.answerbox.answer`` of one search (BM25 on ``text``, the top 10) through answerbox's ``pipeline``, and its
    seconds."""
    started = time.perf_counter()
    body = {"query": {"match": {"text": question}}, "size": 10}
    response = client.post(f"{url}/{index}/_search", params={"search_pipeline": pipeline}, json=body)
    response.raise_for_status()
    return response.json()["ext"]["answerbox"]["answer"], time.perf_counter() - started


def row(kind: str, question: Question, answer: dict[str, Any] | None, seconds: float) -> Row:
    """One fitted example: the shown (or held back) answer, its signals, and whether it is right."""
    shown = (answer or {}).get("candidate") or answer or {}
    text = "" if shown.get("abstained") else shown.get("text", "")
    return {
        "id": question.id,
        "kind": kind,
        "mode": shown.get("mode"),
        "text": text,
        "right": bool(text) and contains_gold(text, question.answers),
        "signals": (answer or {}).get("signals"),
        "llm": (answer or {}).get("llm"),
        "reason": (answer or {}).get("reason"),
        "seconds": round(seconds, 4),
    }


def rows_dir(model_dir: Path, variant: str) -> Path:
    """Where the rows of ``model_dir``'s served ``variant`` are kept. They belong to its weights and to
    the constants that shaped what the pipeline saw (the score scale, CRAG's thresholds, the
    fusion weight, the reader's span cover): another model, or a new ``thresholds`` or ``fusion``,
    starts afresh."""
    manifest = ModelManifest.load(model_dir)
    digest = hashlib.sha256(manifest.model_path(model_dir, variant).read_bytes())
    shaping = [manifest.score_scale, manifest.score_offset, manifest.crag_upper, manifest.crag_lower]
    if manifest.crag_first_pass_stop is not None:  # rows collected before it keep their key
        shaping.append(manifest.crag_first_pass_stop)
    digest.update(json.dumps([*shaping, manifest.rerank_fusion_weight, manifest.span_cover_margin]).encode())
    return data_dir() / "answer_confidence" / digest.hexdigest()[:12]


def collect(
    name: str, client: httpx.Client, url: str, index: str, questions: Sequence[Question], rows: Path
) -> list[Row]:
    """The rows of ``name``, running the questions it does not have yet."""
    return resume(
        rows / f"{name}.jsonl",
        questions,
        lambda q: row(name, q, *answer_of(client, url, index, q.text)),
        label=name,
        every=100,
    )


@contextlib.contextmanager
def answerbox(
    opensearch_url: str, llm_url: str | None, model: str | None, mode: str, models: dict[str, Any]
) -> Iterator[str]:
    llm = {"base_url": llm_url, "model": model, "timeout_s": 120} if llm_url else {}
    limits = {"processor_timeout_s": 300, "pipeline_budget_s": 300}
    settings = Settings.load(opensearch={"url": opensearch_url}, llm=llm, limits=limits, models=models)
    with serve_in_thread(create_app(settings)) as url:
        httpx.put(f"{url}/_search/pipeline/{PIPELINE_ID}", json=pipeline(mode), timeout=60).raise_for_status()
        yield url


# --- the fit ---------------------------------------------------------------------------


def fit_logistic(
    x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], l2: float
) -> tuple[npt.NDArray[np.float64], float]:
    """Newton's method on the L2-penalised log-likelihood (the intercept unpenalised)."""
    design = np.hstack([x, np.ones((len(x), 1))])
    w = np.zeros(design.shape[1])
    penalty = np.full(design.shape[1], l2)
    penalty[-1] = 0.0
    for _ in range(100):
        p = 1 / (1 + np.exp(-np.clip(design @ w, -60, 60)))
        gradient = design.T @ (p - y) + penalty * w
        hessian = (design * (p * (1 - p))[:, None]).T @ design + np.diag(penalty)
        step = np.linalg.solve(hessian, gradient)
        w -= step
        if np.max(np.abs(step)) < 1e-8:
            break
    return w[:-1], float(w[-1])


def predict(x: npt.NDArray[np.float64], coef: npt.NDArray[np.float64], intercept: float) -> npt.NDArray[np.float64]:
    result: npt.NDArray[np.float64] = 1 / (1 + np.exp(-np.clip(x @ coef + intercept, -60, 60)))
    return result


def cross_validated(
    x: npt.NDArray[np.float64], y: npt.NDArray[np.float64], l2: float, seed: int, folds: int = 5
) -> npt.NDArray[np.float64]:
    order = np.random.default_rng(seed).permutation(len(y))
    out = np.zeros(len(y))
    for k in range(folds):
        test = order[k::folds]
        train = np.setdiff1d(order, test)
        coef, intercept = fit_logistic(x[train], y[train], l2)
        out[test] = predict(x[test], coef, intercept)
    return out


def aurc(confidence: Sequence[float], right: Sequence[bool]) -> float:
    """Area under the risk-coverage curve, most confident first (lower is better)."""
    order = np.argsort(-np.asarray(confidence, dtype=float), kind="stable")
    wrong = np.cumsum(~np.asarray(right, dtype=bool)[order])
    return float(np.mean(wrong / np.arange(1, len(order) + 1)))


def features(
    rows: Sequence[Row], kind: type[SnippetSignals] | type[GenerativeSignals], drop: Sequence[str] = ()
) -> tuple[list[str], npt.NDArray[np.float64]]:
    """The features' names and values, less those in ``drop`` (the fit leaves them at 0)."""
    table = [kind(**r["signals"]).features() for r in rows]
    names = [n for n in table[0] if n not in drop]
    return names, np.asarray([[f[n] for n in names] for f in table], dtype=float)


def fit(
    rows: Sequence[Row],
    kind: type[SnippetSignals] | type[GenerativeSignals],
    l2: float,
    seed: int,
    drop: Sequence[str] = (),
) -> tuple[dict[str, Any], npt.NDArray[np.float64]]:
    """The model (as the manifest holds it) and the rows' cross-validated probabilities."""
    names, x = features(rows, kind, drop)
    y = np.asarray([r["right"] for r in rows], dtype=float)
    coef, intercept = fit_logistic(x, y, l2)
    model = {
        "coefficients": {n: 0.0 for n in drop} | {n: round(float(c), 6) for n, c in zip(names, coef, strict=True)},
        "intercept": round(intercept, 6),
    }
    return model, cross_validated(x, y, l2, seed)


def across_files(
    rows: Sequence[Row], file_of: dict[str, str], l2: float, drop: Sequence[str] = ()
) -> dict[str, dict[str, float]]:
    """The snippet model fitted on every other training file and applied to each: the nearest
    thing the training data has to a new domain. Its ECE and how far its mean confidence
    overshoots the share right there say how much calibration a shift of domain costs."""
    _, x = features(rows, SnippetSignals, drop)
    y = np.asarray([r["right"] for r in rows], dtype=float)
    files = np.asarray([file_of[r["id"]] for r in rows])
    found = {}
    for name in sorted(set(files)):
        coef, intercept = fit_logistic(x[files != name], y[files != name], l2)
        p = predict(x[files == name], coef, intercept)
        found[name] = {
            "ece": round(ece(list(p), list(y[files == name] > 0)), 4),
            "overconfidence": round(float(p.mean() - y[files == name].mean()), 4),
        }
    return found


def by_kind(rows: Sequence[Row], cv: Sequence[float]) -> dict[str, dict[str, float]]:
    """Per kind of question, the cross-validated confidence's ECE and how far its mean overshoots
    the share right: the pooled fit can be right overall yet low on the answerable questions and
    high where the paragraph is gone, when its features do not tell the two apart."""
    found = {}
    for kind in sorted({r["kind"] for r in rows}):
        p = [float(c) for r, c in zip(rows, cv, strict=True) if r["kind"] == kind]
        right = [bool(r["right"]) for r in rows if r["kind"] == kind]
        found[kind] = {"ece": round(ece(p, right), 4), "overconfidence": round(float(np.mean(p) - np.mean(right)), 4)}
    return found


def skip_threshold(
    snippets: dict[str, tuple[float, bool]], generated: Sequence[tuple[Row, float]]
) -> tuple[float, dict[str, Any]]:
    """The lowest snippet confidence above which ``auto`` with the LLM answers no more questions right.

    ``snippets``: id → (snippet confidence, snippet right); ``generated``: the LLM rows with
    their cross-validated confidence. Below the threshold ``auto`` asks the LLM and keeps its
    checked answer when it is more confident than the snippet."""
    by_id = {r["id"]: (r, c) for r, c in generated}
    ids = [i for i in by_id if i in snippets]

    def right_with_llm_below(t: float) -> int:
        total = 0
        for i in ids:
            confidence, snippet_right = snippets[i]
            row, generative = by_id[i]
            uses_llm = confidence < t and row["mode"] == "generative" and row["text"] and generative > confidence
            total += bool(row["right"]) if uses_llm else snippet_right
        return total

    grid = sorted({round(c, 2) for c, _ in snippets.values()} | {0.0, 1.0})
    counts = {t: right_with_llm_below(t) for t in grid}
    best = max(counts.values())
    chosen = min(t for t, n in counts.items() if n == best)
    return chosen, {
        "questions": len(ids),
        "right_never_asking": counts[0.0],
        "right_always_asking": counts[1.0],
        "right_at_chosen": best,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    paragraphs = load_squad(TRAIN_FILES, args.data)
    pool = held_out(paragraphs, args.holdout)
    sample = sample_questions(pool, args.questions, args.seed)
    questions = [q for _, q in sample]
    file_of = {q.id: p.id.split("/")[0] for p, q in sample}
    removed_sample = random.Random(args.seed + 1).sample(sample, int(len(sample) * args.removed_share))
    gone = {p.id for p, _ in removed_sample}
    llm_questions = questions[: args.llm_questions]
    # The model the rows are keyed by is the one served: both come from these two arguments.
    served = {"dir": args.model_dir, "variant": args.variant}
    rows = rows_dir(args.model_dir, args.variant)
    # CRAG's keyword rewrite asks the LLM where one is configured, else takes the question's words:
    # the snippets' rows belong to one or the other.
    snippet_rows_dir = rows / f"rewrite-{args.llm_model}" if args.rewrite_llm else rows
    log.info(
        "%d paragraphs; %d held-out questions (%d with their gold removed, %d with the LLM)",
        *(len(paragraphs), len(questions), len(removed_sample), len(llm_questions)),
    )
    from osmem_server import OsmemServer

    with contextlib.ExitStack() as stack, httpx.Client(timeout=600) as client:
        osmem = stack.enter_context(OsmemServer.start(japanese=False))
        index_with_titles(client, osmem.url, paragraphs, "all")
        index_with_titles(client, osmem.url, [p for p in paragraphs if p.id not in gone], "removed")
        llm_url = None
        if llm_questions or args.rewrite_llm:
            llm_url = args.llm_url or stack.enter_context(local_llm(free_port()))
        rewrite_url = llm_url if args.rewrite_llm else None
        with answerbox(osmem.url, rewrite_url, args.llm_model, "extractive", served) as url:
            answer_of(client, url, "all", "warm up")
            answerable = collect("answerable", client, url, "all", questions, snippet_rows_dir)
            removed = collect("removed", client, url, "removed", [q for _, q in removed_sample], snippet_rows_dir)
        generated: list[Row] = []
        if llm_questions:
            with answerbox(osmem.url, llm_url, args.llm_model, "generative", served) as url:
                generated = collect("generative", client, url, "all", llm_questions, rows)

    snippet_rows = [r for r in answerable + removed if r["signals"] is not None]
    unanswered = len(answerable) + len(removed) - len(snippet_rows)
    extractive, cv = fit(snippet_rows, SnippetSignals, args.l2, args.seed, args.drop)
    right = [bool(r["right"]) for r in snippet_rows]
    # id → (cross-validated confidence, right) of each answerable question's snippet.
    snippets = {
        r["id"]: (float(c), bool(r["right"]))
        for r, c in zip(snippet_rows, cv, strict=True)
        if r["kind"] == "answerable"
    }
    # Over every answerable question, as the benches count: one without a snippet never shows.
    shown = [snippets.get(r["id"], (0.0, False)) for r in answerable]
    answerable_confidence = [c for c, _ in shown]
    answerable_right = [ok for _, ok in shown]
    min_confidence = lowest_threshold(answerable_confidence, answerable_right, args.precision, args.z)
    point_estimate = lowest_threshold(answerable_confidence, answerable_right, args.precision, 0.0)
    removed_cv = [float(c) for r, c in zip(snippet_rows, cv, strict=True) if r["kind"] == "removed"]
    result: dict[str, Any] = {"extractive": extractive, "min_confidence": min_confidence, "skip_llm_above": 1.0}
    record: dict[str, Any] = {
        "data": [f"squad_shifts/{name}" for name in TRAIN_FILES],
        "holdout": args.holdout,
        "questions": len(questions),
        "removed": len(removed_sample),
        "seed": args.seed,
        "l2": args.l2,
        "dropped": args.drop,
        "pipeline": pipeline("extractive"),
        "keyword_rewrite": f"the LLM ({args.llm_model})" if args.rewrite_llm else "the question's own words (no LLM)",
        "right": "the answer contains a gold answer (SQuAD normalisation)",
        "no_span": unanswered,
        "extractive_cv": {
            "rows": len(snippet_rows),
            "right": round(sum(right) / len(right), 4),
            "ece": round(ece(list(cv), right), 4),
            "aurc": round(aurc(list(cv), right), 4),
            "chosen_on": "answerable questions",
            "at_min_confidence": answered_at(answerable_confidence, answerable_right, min_confidence),
            "removed_answered": round(sum(c >= min_confidence for c in removed_cv) / len(removed), 4)
            if removed
            else None,
            "precision_target": args.precision,
            "wilson_z": args.z,
            "point_estimate_threshold": point_estimate,
            "at_point_estimate": answered_at(answerable_confidence, answerable_right, point_estimate),
            "by_kind": by_kind(snippet_rows, list(cv)),
            "across_files": across_files(snippet_rows, file_of, args.l2, args.drop),
        },
        "seconds_p50": round(float(np.median([r["seconds"] for r in answerable])), 4),
        # CRAG's corrective search, and the keyword rewrite before it, run mostly here.
        "removed_seconds_p50": round(float(np.median([r["seconds"] for r in removed])), 4) if removed else None,
    }
    # The snippet's confidence as serving computes it now that the extractive model is fitted
    # (the generative rows were collected beside the same snippet, on the same index).
    names, x = features([r for r in answerable if r["signals"] is not None], SnippetSignals)
    coef = np.asarray([extractive["coefficients"][n] for n in names])
    fitted_snippet = dict(
        zip(
            (r["id"] for r in answerable if r["signals"] is not None),
            predict(x, coef, extractive["intercept"]),
            strict=True,
        )
    )
    usable = [
        r | {"signals": r["signals"] | {"snippet_confidence": float(fitted_snippet.get(r["id"], 0.0))}}
        for r in generated
        if r["signals"] is not None and r["mode"] == "generative" and r["text"]
    ]
    if len(usable) >= args.min_generative:
        generative, generative_cv = fit(usable, GenerativeSignals, args.l2, args.seed)
        skip, table = skip_threshold(snippets, list(zip(usable, generative_cv, strict=True)))
        result |= {"generative": generative, "skip_llm_above": skip}
        generative_right = [bool(r["right"]) for r in usable]
        record["generative_cv"] = {
            "asked": len(generated),
            "held_up": len(usable),
            "right": round(sum(generative_right) / len(usable), 4),
            "ece": round(ece(list(generative_cv), generative_right), 4),
            "seconds_p50": round(float(np.median([r["seconds"] for r in generated])), 4),
            **table,
        }
    return {"answer_confidence": result, "record": record}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", type=Path, default=ModelSettings().dir)
    parser.add_argument("--variant", default="int8", help="fit the variant that is served")
    parser.add_argument(
        "--data", type=Path, default=None, help="the bigbench tarball (default: in $ANSWERBOX_DATA_DIR)"
    )
    parser.add_argument("--holdout", type=holdout_fraction, default=0.1)
    parser.add_argument("--questions", type=int, default=600)
    parser.add_argument("--removed-share", type=float, default=0.5)
    parser.add_argument(
        "--llm-questions", type=int, default=0, help="answerable questions also asked with the LLM (generative mode)"
    )
    parser.add_argument(
        "--llm-url", default=None, help="an OpenAI-compatible /v1 URL (default: the local LLM, started here)"
    )
    parser.add_argument("--llm-model", default="smollm2")
    parser.add_argument(
        "--rewrite-llm",
        action="store_true",
        help="the extractive rows with the LLM configured, so CRAG's keyword rewrite asks it (as a pipeline "
        "served with an LLM does); without it the rewrite takes the question's own words",
    )
    parser.add_argument("--min-generative", type=int, default=15, help="held-up LLM answers needed to fit their model")
    parser.add_argument("--precision", type=float, default=0.85)
    parser.add_argument(
        "--z",
        type=float,
        default=1.645,
        help="min_confidence meets --precision by the one-sided Wilson bound at z (0: point estimate)",
    )
    parser.add_argument("--l2", type=float, default=1.0)
    parser.add_argument(
        "--drop",
        nargs="*",
        default=[],
        choices=SNIPPET_FEATURES,
        help="snippet features left out (coefficient 0): what each adds, with --dry-run",
    )
    parser.add_argument("--seed", type=int, default=45)
    parser.add_argument("--dry-run", action="store_true")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    for chatty in ("httpx", "opensearch"):  # a line per request
        logging.getLogger(chatty).setLevel(logging.WARNING)
    args = parse_args(argv)
    fitted = run(args)
    print(json.dumps(fitted, indent=2))
    if not args.dry_run:
        manifest = ModelManifest.load(args.model_dir)
        calibration = {**manifest.calibration, "answer_confidence": fitted["record"]}
        path = manifest.replace(answer_confidence=fitted["answer_confidence"], calibration=calibration).save(
            args.model_dir
        )
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
