"""Cited answers on SQuAD v1.1 dev: answer quality, citation precision, the check's effect, stream latency.

All 2,067 dev paragraphs go into a fresh osmem-server (``_id`` = paragraph id, ``title`` =
article); answerbox runs in front of it with a ``cited_answer`` pipeline, twice: with no
LLM (extractive mode, the reader's featured snippet) and with the real local LLM
(generative mode). Every question goes through ``POST /squad/_answerbox/stream``, which
gives, per question, the hits, the raw LLM text (the tokens), and the checked answer, with
the time of each. Metrics:

- extractive: SQuAD EM / F1 of the answer text;
- generative: gold-answer containment (normalised) of the checked answer and of the raw text;
- citation precision: a citation is right when its hit is the gold paragraph or contains a
  gold answer; the unsupported-citation rate is 1 - precision, over the raw markers before
  the check (out-of-range markers count as unsupported) and over the kept ones after it;
- the stream's time to the hits and to the first token against the time to the answer,
  and the plain ``_search`` time on ``--search-sample`` questions.

Mode ``replay`` runs the generative questions again with a scripted LLM that gives back
the texts the real LLM wrote: the same answers, checked by the models as they are now
(the LLM is slow; re-checking its answers after a model change costs seconds). Its stream
times are those of a zero-latency LLM: the gap between the first token and the answer is
the check.

``--pipeline embedded`` and ``--pipeline readme`` run the embedded default's pipeline and
the README's admin pipeline instead (expansion, evaluator, chain: whatever they hold), with
answerbox's default limits: the numbers a new user gets.

Rows are appended to ``$ANSWERBOX_BENCH_DIR/answer_eval/<run>.jsonl`` so a run resumes.
Use an LLM server that finishes every stream: llama.cpp's ``--interrupt_requests False``.

    PYTHONPATH=plugin python -m bench.answer_eval --sample 300 --modes extractive generative replay
    PYTHONPATH=plugin python -m bench.answer_eval --sample 300 --modes generative --pipeline embedded
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import time
from collections.abc import Sequence
from contextlib import ExitStack
from typing import Any

import httpx
from answerbox.app import create_app
from answerbox.core.config import ModelSettings, Settings
from answerbox.models.manifest import MANIFEST_FILE, ModelManifest
from answerbox.ops.embedded import SAMPLE_PIPELINE
from answerbox.processors.answering.evidence import EvidenceFields, evidence_from_hits, number
from answerbox.processors.text.claims import parse_claims
from osmem_server import OsmemServer

from bench.harness import (
    BENCH_DIR,
    SQUAD_INDEX,
    ScriptedLLM,
    dev_paragraphs,
    match_body,
    quantile,
    readme_pipeline,
    serve,
)
from onnx_models.data.squad import (
    Paragraph,
    Question,
    contains_gold,
    exact_match,
    f1_score,
    index_with_titles,
    sample_questions,
)

MODES = ("extractive", "generative", "replay")


def _pipeline(args: argparse.Namespace) -> dict[str, Any]:
    if args.pipeline == "embedded":
        return SAMPLE_PIPELINE
    if args.pipeline == "readme":
        return readme_pipeline()
    config = {
        "size": args.size,
        "snippet_chars": args.snippet_chars,
        "max_tokens": args.max_tokens,
        "demonstrations": args.demonstrations,
        "timeout_s": 240,
    }
    if args.min_confidence is not None:
        config["min_confidence"] = args.min_confidence
    return {"response_processors": [{"cited_answer": config}]}


def _stream(client: httpx.Client, url: str, question: str) -> dict[str, Any]:
    """Events of one streamed search, with the seconds at which each kind first arrived."""
    started = time.perf_counter()
    seen: dict[str, Any] = {"tokens": [], "errors": [], "at": {}}
    with client.stream(
        "POST", f"{url}/{SQUAD_INDEX}/_answerbox/stream?search_pipeline=answers", json=match_body(question)
    ) as response:
        response.raise_for_status()
        name = ""
        for line in response.iter_lines():
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
                seen["at"].setdefault(name, time.perf_counter() - started)
            elif line.startswith("data: "):
                data = json.loads(line.removeprefix("data: "))
                if name == "token":
                    seen["tokens"].append(data["text"])
                elif name == "error":
                    seen["errors"].append(data)
                elif name == "hits":
                    seen["hits"] = data["hits"]["hits"]
                elif name == "answer":
                    seen["answer"] = data
    return seen


def _raw_citations(raw: str, hits: list[dict[str, Any]], args: argparse.Namespace) -> list[str | None]:
    """The hit id behind every marker of the raw LLM text (None: out of range), numbered as the processor numbers."""
    blocks = number(
        evidence_from_hits(hits[: args.size], EvidenceFields(), snippet_chars=args.snippet_chars), args.size
    )
    by_marker = {b.marker: b.id for b in blocks}
    return [by_marker.get(m) for claim in parse_claims(raw) for m in claim.markers]


def _row(
    seen: dict[str, Any], paragraph: Paragraph, question: Question, texts: dict[str, str], args: argparse.Namespace
) -> dict[str, Any]:
    answer = seen["answer"]["answer"]

    def right(doc_id: str | None) -> bool:
        return doc_id is not None and (doc_id == paragraph.id or contains_gold(texts[doc_id], question.answers))

    raw = "".join(seen["tokens"]).strip()
    return {
        "id": question.id,
        "answer": answer["text"],
        "mode": answer["mode"],
        "abstained": answer["abstained"],
        "raw": raw,
        "em": exact_match(answer["text"], question.answers) if not answer["abstained"] else 0.0,
        "f1": f1_score(answer["text"], question.answers) if not answer["abstained"] else 0.0,
        "contains": not answer["abstained"] and contains_gold(answer["text"], question.answers),
        "raw_contains": contains_gold(raw, question.answers),
        "cited_right": [right(c["_id"]) for c in answer["citations"]],
        "cited_support": [c.get("support") for c in answer["citations"]],
        # Only the bench's own pipeline numbers its evidence as _raw_citations does.
        "raw_cited_right": [right(doc) for doc in _raw_citations(raw, seen["hits"], args)]
        if args.pipeline == "answers"
        else None,
        "gold_in_hits": paragraph.id in {h["_id"] for h in seen["hits"][: args.size]},
        "at": seen["at"],
        "errors": len(seen["errors"]),
        "warnings": seen["answer"]["warnings"],
    }


def _rows(name: str) -> dict[str, dict[str, Any]]:
    path = BENCH_DIR / "answer_eval" / f"{name}.jsonl"
    return {r["id"]: r for r in map(json.loads, path.read_text().splitlines())} if path.exists() else {}


def _append(name: str, row: dict[str, Any]) -> None:
    path = BENCH_DIR / "answer_eval" / f"{name}.jsonl"
    with path.open("a") as out:
        out.write(json.dumps(row) + "\n")


def _run(
    client: httpx.Client,
    url: str,
    name: str,
    sample: list[tuple[Paragraph, Question]],
    texts: dict[str, str],
    args: argparse.Namespace,
) -> None:
    done = _rows(name)
    todo = [(p, q) for p, q in sample if q.id not in done]
    started = time.perf_counter()
    for n, (paragraph, question) in enumerate(todo, 1):
        _append(name, _row(_stream(client, url, question.text), paragraph, question, texts, args))
        if n % 25 == 0:
            print(f"  {name}: {n}/{len(todo)} in {time.perf_counter() - started:.0f}s", flush=True)


def _run_name(args: argparse.Namespace, mode: str) -> str:
    """Where a run's rows go: the bench's own cited-answer pipeline keeps the bare mode."""
    return mode if args.pipeline == "answers" else f"{args.pipeline}-{mode}"


def _replay_llm(
    stack: ExitStack, sample: list[tuple[Paragraph, Question]]
) -> tuple[str, list[tuple[Paragraph, Question]]]:
    """A scripted LLM that answers each question with the text the real LLM gave in the generative run."""
    recorded = _rows("generative")
    by_question = {q.text: recorded[q.id]["raw"] for _, q in sample if q.id in recorded}

    def reply(messages: list[dict[str, str]]) -> str:
        asked = [line for line in messages[-1]["content"].splitlines() if line.startswith("question: ")][-1]
        return str(by_question.get(asked.removeprefix("question: "), ""))

    url = stack.enter_context(serve(ScriptedLLM(reply).app()))
    return f"{url}/v1", [(p, q) for p, q in sample if q.id in recorded]


def _search_times(client: httpx.Client, url: str, sample: list[tuple[Paragraph, Question]]) -> list[float]:
    times = []
    for _, question in sample:
        started = time.perf_counter()
        client.post(
            f"{url}/{SQUAD_INDEX}/_search?search_pipeline=answers", json=match_body(question.text)
        ).raise_for_status()
        times.append(time.perf_counter() - started)
    return times


def _share(flags: Sequence[bool]) -> str:
    return f"{100 * sum(flags) / len(flags):.1f}% ({sum(flags)}/{len(flags)})" if flags else "n/a (0)"


def _report(name: str, mode: str, sample: list[tuple[Paragraph, Question]], search_times: list[float]) -> None:
    rows = _rows(name)
    rows_in = [rows[q.id] for _, q in sample if q.id in rows]
    if not rows_in:
        return
    n = len(rows_in)
    print(f"\n== {name}: {n} questions ==")
    print(f"gold paragraph among the evidence: {_share([r['gold_in_hits'] for r in rows_in])}")
    print(f"abstained: {_share([r['abstained'] for r in rows_in])}; LLM errors: {sum(r['errors'] for r in rows_in)}")
    modes = collections.Counter(r["mode"] for r in rows_in if not r["abstained"])
    print(f"answers by mode: {dict(modes)}; with a warning: {_share([bool(r['warnings']) for r in rows_in])}")
    if mode == "extractive":
        print(
            f"EM {100 * statistics.mean(r['em'] for r in rows_in):.2f}  F1 "
            f"{100 * statistics.mean(r['f1'] for r in rows_in):.2f}"
        )
    else:  # generative, or its replay: the recorded LLM texts checked again by the current models
        checked, raw_text = _share([r["contains"] for r in rows_in]), _share([r["raw_contains"] for r in rows_in])
        print(f"gold-answer containment: checked answer {checked}, raw LLM text {raw_text}")
        if all(r.get("raw_cited_right") is not None for r in rows_in):
            raw = [ok for r in rows_in for ok in r["raw_cited_right"]]
            print(
                f"citations per answer: raw {len(raw) / n:.2f}, after the check "
                f"{sum(len(r['cited_right']) for r in rows_in) / n:.2f}"
            )
            print(f"unsupported-citation rate before the check: {_share([not ok for ok in raw])}")
    kept = [ok for r in rows_in for ok in r["cited_right"]]
    print(
        f"citation precision: {_share(kept)}; unsupported-citation rate after the check: "
        f"{_share([not ok for ok in kept])}"
    )
    for event in ("hits", "token", "answer"):
        times = [r["at"][event] * 1000 for r in rows_in if event in r["at"]]
        if times:
            print(
                f"stream time to first {event:<6}: p50 {quantile(times, 0.5):8.1f} ms  p95 "
                f"{quantile(times, 0.95):8.1f} ms  (n={len(times)})"
            )
    if search_times:
        ms = [t * 1000 for t in search_times]
        print(
            f"full _search response (same pipeline): p50 {quantile(ms, 0.5):8.1f} ms  p95 "
            f"{quantile(ms, 0.95):8.1f} ms  (n={len(ms)})"
        )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=300)
    parser.add_argument("--seed", type=int, default=2023)
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--size", type=int, default=5, help="evidence blocks (cited_answer size)")
    parser.add_argument("--snippet-chars", type=int, default=1000)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--demonstrations", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument(
        "--min-confidence",
        type=float,
        default=None,
        help="cited_answer's gate (default: the manifest's; 0: every candidate answers, as before the gate)",
    )
    parser.add_argument("--search-sample", type=int, default=10, help="questions also timed through plain _search")
    parser.add_argument("--llm-url", default="http://127.0.0.1:8081/v1")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument(
        "--pipeline",
        choices=("answers", "embedded", "readme"),
        default="answers",
        help="answers: cited_answer alone, shaped by the options above; embedded: the embedded default's pipeline;"
        " readme: the README's admin pipeline. The last two run with answerbox's default limits and LLM timeout.",
    )
    args = parser.parse_args(argv)
    if args.pipeline != "answers" and "replay" in args.modes:
        parser.error("replay re-checks one LLM answer per question: only with --pipeline answers")

    paragraphs = dev_paragraphs()
    texts = {p.id: p.context for p in paragraphs}
    sample = sample_questions(paragraphs, args.sample, args.seed)
    print(f"{len(paragraphs)} paragraphs; sample {len(sample)} questions (seed {args.seed}); {vars(args)}", flush=True)
    model_dir = ModelSettings().dir
    manifest = ModelManifest.load(model_dir)
    written = time.strftime("%H:%M UTC", time.gmtime((model_dir / MANIFEST_FILE).stat().st_mtime))
    print(
        f"model {model_dir} (manifest {written}): support_lower {manifest.support_lower}, theta {manifest.theta}",
        flush=True,
    )
    # Other questions than the sample's: the encoder caches what it read, so a repeat would time the cache.
    cold = [
        pq for pq in sample_questions(paragraphs, args.sample + args.search_sample, args.seed + 1) if pq not in sample
    ]
    (BENCH_DIR / "answer_eval").mkdir(parents=True, exist_ok=True)
    search_times: dict[str, list[float]] = {}
    if not args.report_only:
        with ExitStack() as stack, httpx.Client(timeout=600) as client:
            osmem = OsmemServer.start(japanese=False)
            stack.callback(osmem.close)
            index_with_titles(client, osmem.url, paragraphs, SQUAD_INDEX)
            for mode in args.modes:
                questions = sample
                llm: dict[str, Any] = {}
                if mode == "generative":
                    llm = {"base_url": args.llm_url, "model": "smollm2"}
                elif mode == "replay":
                    replay_url, questions = _replay_llm(stack, sample)
                    llm = {"base_url": replay_url}
                limits: dict[str, Any] = {}
                if args.pipeline == "answers":  # the bench's own pipeline measures the answer, not the time limits
                    limits = {"processor_timeout_s": 400, "pipeline_budget_s": 400}
                    if mode == "generative":
                        llm["timeout_s"] = 240
                settings = Settings.load(opensearch={"url": osmem.url}, llm=llm, limits=limits)
                url = stack.enter_context(serve(create_app(settings)))
                client.put(f"{url}/_search/pipeline/answers", json=_pipeline(args)).raise_for_status()
                _stream(client, url, "warm up")  # loads the models: not part of any question's time
                print(f"{mode}: {len(questions)} questions", flush=True)
                _run(client, url, _run_name(args, mode), questions, texts, args)
                search_times[mode] = _search_times(client, url, cold[: args.search_sample])
    for mode in args.modes:
        _report(_run_name(args, mode), mode, sample, search_times.get(mode, []))


if __name__ == "__main__":
    main()
