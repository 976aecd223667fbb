"""Does LLM query expansion help BM25 on SQuAD v1.1 dev, and what does a warm cache cost?

The 2,067 dev paragraphs go into a fresh osmem-server; answerbox runs in front of it with
one pipeline per method (the real ``llm_query_expansion`` processor and the real LLM). Each
question's gold paragraph is the one it was written on. For every method both query
shapes are scored from the same expansion: ``bool`` through answerbox, ``repeat`` built
from the reported expansion with the processor's own ``expanded_clause`` and sent straight
to osmem (one LLM call serves both).

Per-question results are appended to ``$ANSWERBOX_BENCH_DIR/retrieval_eval/<method>.jsonl``
so an interrupted run resumes; ``--report-only`` prints the tables from those files,
``--weights`` re-scores them with other query weights, and ``--overhead`` times warm-cache
searches against plain ones.

    python -m bench.retrieval_eval --sample 300 --full q2e_zs --others 100 --until 04:30
    python -m bench.retrieval_eval --full q2e_zs --overhead q2e_zs
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import statistics
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from math import log2
from typing import Any

import httpx
from answerbox.app import create_app
from answerbox.core.config import Settings
from answerbox.core.query_text import TextClause, replace_text_clauses
from answerbox.processors.query_expansion.expanded_query import expanded_clause
from osmem_server import OsmemServer
from scipy import stats

from bench.harness import BENCH_DIR, ScriptedLLM, serve
from onnx_models.data.squad import DEV_FILE, load_squad

INDEX = "squad"
METHODS = ("q2e_zs", "q2d_prf", "q2e_prf", "q2d_zs", "cot_zs", "cot_prf", "q2d_fs", "q2e_fs")
# Written for this bench, on Wikipedia-style questions that are not in SQuAD dev.
FEW_SHOT = {
    "q2d": [
        {
            "query": "When did the Berlin Wall fall?",
            "output": (
                "The Berlin Wall fell on 9 November 1989, when East Germany opened its border crossings to West "
                "Berlin after weeks of protests."
            ),
        },
        {
            "query": "What is the largest moon of Saturn?",
            "output": (
                "Titan is the largest moon of Saturn and the second-largest in the Solar System; it has a thick "
                "nitrogen atmosphere."
            ),
        },
    ],
    "q2e": [
        {
            "query": "When did the Berlin Wall fall?",
            "output": "Berlin Wall, fall, 1989, East Germany, border opening, Cold War",
        },
        {
            "query": "What is the largest moon of Saturn?",
            "output": "Saturn, largest moon, Titan, natural satellite, atmosphere",
        },
    ],
}
CUTS = (1, 10, 100)


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    gold: str


def _paragraphs() -> tuple[list[str], list[Question]]:
    """Dev paragraphs and questions, extracted from the tarball once and kept as JSON."""
    cached = BENCH_DIR / "squad_dev.json"
    if not cached.exists():
        rows = [
            {"context": p.context, "questions": [[q.id, q.text] for q in p.questions]} for p in load_squad([DEV_FILE])
        ]
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(json.dumps(rows))
    rows = json.loads(cached.read_text())
    questions = [Question(qid, text, str(i)) for i, row in enumerate(rows) for qid, text in row["questions"]]
    return [row["context"] for row in rows], questions


def _index(client: httpx.Client, url: str, contexts: list[str]) -> None:
    client.put(f"{url}/{INDEX}", json={"mappings": {"properties": {"text": {"type": "text"}}}}).raise_for_status()
    lines = "".join(
        json.dumps({"index": {"_id": str(i)}}) + "\n" + json.dumps({"text": c}) + "\n" for i, c in enumerate(contexts)
    )
    answer = client.post(
        f"{url}/{INDEX}/_bulk?refresh=true", content=lines, headers={"content-type": "application/x-ndjson"}
    )
    answer.raise_for_status()
    assert not answer.json()["errors"]


def _processor(method: str) -> dict[str, Any]:
    kind, mode = method.split("_")
    # Shorter outputs and PRF contexts than the processor's defaults: on two CPU cores the
    # 135M model reads ~20 and writes ~4 tokens a second, and the sample must fit the night.
    config: dict[str, Any] = {
        "method": kind,
        "mode": mode,
        "timeout_s": 120,
        "max_tokens": 48 if kind == "q2e" else 64,
        "prf_max_chars": 400,
    }
    if mode == "fs":
        config["examples"] = FEW_SHOT[kind]
    return {"llm_query_expansion": config}


def _body(question: str) -> dict[str, Any]:
    return {"query": {"match": {"text": question}}, "size": max(CUTS), "_source": False}


def _ids(response: httpx.Response) -> list[str]:
    response.raise_for_status()
    return [hit["_id"] for hit in response.json()["hits"]["hits"]]


def _rank(ids: list[str], gold: str) -> int | None:
    return ids.index(gold) + 1 if gold in ids else None


def _results(method: str) -> dict[str, dict[str, Any]]:
    path = BENCH_DIR / "retrieval_eval" / f"{method}.jsonl"
    if not path.exists():
        return {}
    return {row["id"]: row for row in map(json.loads, path.read_text().splitlines())}


def _append(method: str, row: dict[str, Any]) -> None:
    path = BENCH_DIR / "retrieval_eval" / f"{method}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        out.write(json.dumps(row) + "\n")


def _run_bm25(client: httpx.Client, answerbox: str, sample: list[Question]) -> None:
    done = _results("bm25")
    for q in sample:
        if q.id not in done:
            _append(
                "bm25",
                {
                    "id": q.id,
                    "rank": _rank(_ids(client.post(f"{answerbox}/{INDEX}/_search", json=_body(q.text))), q.gold),
                },
            )


def _repeat_rank(client: httpx.Client, osmem: str, q: Question, expansion: str, weight: int = 5) -> int | None:
    body = _body(q.text)
    if expansion:
        replace_text_clauses(
            body, q.text, lambda clause: expanded_clause(clause, expansion, weight=weight, combine="repeat")
        )
    return _rank(_ids(client.post(f"{osmem}/{INDEX}/_search", json=body)), q.gold)


def _run_one(client: httpx.Client, answerbox: str, osmem: str, method: str, q: Question) -> None:
    response = client.post(f"{answerbox}/{INDEX}/_search?search_pipeline=qe_{method}", json=_body(q.text))
    report = response.json()["ext"]["answerbox"]
    expansion = report["query_expansion"]["expansion"]
    _append(
        method,
        {
            "id": q.id,
            "rank": _rank(_ids(response), q.gold),
            "repeat_rank": _repeat_rank(client, osmem, q, expansion),
            "expansion": expansion,
            "fallback": report["query_expansion"]["fallback"],
            "llm_ms": report["query_expansion"]["llm_ms"],
            "warnings": report["warnings"],
        },
    )


def _run(
    client: httpx.Client, answerbox: str, osmem: str, methods: Sequence[str], sample: list[Question], until: float
) -> None:
    """Question by question, every method in turn, so that all methods stop at the same n."""
    done = {m: _results(m) for m in methods}
    started = time.perf_counter()
    for n, q in enumerate(sample, 1):
        if time.time() > until:
            print(f"  stopped at the deadline after {n - 1} questions", flush=True)
            return
        for method in methods:
            if q.id not in done[method]:
                _run_one(client, answerbox, osmem, method, q)
        if n % 10 == 0:
            print(
                f"  {'+'.join(methods)}: {n}/{len(sample)} questions, {time.perf_counter() - started:.0f}s", flush=True
            )


def _metrics(ranks: Sequence[int | None]) -> dict[str, float]:
    n = len(ranks)
    out = {f"R@{k}": sum(1 for r in ranks if r is not None and r <= k) / n for k in CUTS}
    out["MRR@10"] = sum(1 / r for r in ranks if r is not None and r <= 10) / n
    out["nDCG@10"] = sum(1 / log2(r + 1) for r in ranks if r is not None and r <= 10) / n
    return out


def _rr10(rank: int | None) -> float:
    return 1 / rank if rank is not None and rank <= 10 else 0.0


def _hit10(rank: int | None) -> float:
    return 1.0 if rank is not None and rank <= 10 else 0.0


def _paired(base: list[int | None], other: list[int | None]) -> str:
    """Paired t-test on RR@10 and on R@10, and an exact sign test on R@10's discordant pairs."""
    rr = stats.ttest_rel([_rr10(r) for r in other], [_rr10(r) for r in base])
    hit = [(_hit10(b), _hit10(o)) for b, o in zip(base, other, strict=True)]
    wins, losses = sum(1 for b, o in hit if o > b), sum(1 for b, o in hit if o < b)
    sign = stats.binomtest(wins, wins + losses).pvalue if wins + losses else 1.0
    r10 = stats.ttest_rel([o for _, o in hit], [b for b, _ in hit]) if wins + losses else None
    return (
        f"t(RR@10) p={rr.pvalue:.3g}  t(R@10) p={r10.pvalue if r10 else 1.0:.3g}  sign(R@10) +{wins}/-{losses} "
        f"p={sign:.3g}"
    )


def _report(sample: list[Question], methods: Sequence[str]) -> None:
    bm25 = _results("bm25")
    print(
        f"\nSQuAD v1.1 dev: 2,067 paragraphs, sample of {len(sample)} questions (seeded); osmem-server BM25; "
        "LLM smollm2"
    )
    header = (
        f"{'run':<18}{'n':>5}"
        + "".join(f"{m:>9}" for m in ("R@1", "R@10", "R@100", "MRR@10", "nDCG@10"))
        + f"{'fallback':>9}{'llm_ms p50':>11}"
    )
    print(header)
    for method in ("bm25", *methods):
        rows = _results(method)
        ids = [q.id for q in sample if q.id in rows and q.id in bm25]
        if not ids:
            continue
        for shape, field in (("bool", "rank"), ("repeat", "repeat_rank")) if method != "bm25" else (("", "rank"),):
            ranks = [rows[i][field] for i in ids]
            line = f"{(method + ' ' + shape).strip():<18}{len(ids):>5}" + "".join(
                f"{v:>9.3f}" for v in _metrics(ranks).values()
            )
            if method != "bm25":
                fallbacks = sum(1 for i in ids if rows[i]["fallback"])
                llm = [rows[i]["llm_ms"] for i in ids if rows[i]["llm_ms"] is not None]
                line += f"{fallbacks:>9}{statistics.median(llm) if llm else 0:>11.0f}"
                base = [bm25[i]["rank"] for i in ids]
                same = _metrics(base)
                line += (
                    f"\n{'':<23}bm25 on the same {len(ids)}: R@10 {same['R@10']:.3f} MRR@10 {same['MRR@10']:.3f}; "
                    + _paired(base, ranks)
                )
            print(line)


def _replay_llm(stack: ExitStack, method: str, sample: list[Question]) -> tuple[str, list[Question]]:
    """An OpenAI-compatible stub answering each prompt with the expansion stored for its question.

    It warms the processor's cache without the real model, whose speed is not what the
    overhead measurement is about; the cached texts are the real model's.
    """
    stored = _results(method)
    chosen = [q for q in sample if q.id in stored and stored[q.id]["expansion"]]
    # The processor expands the stripped question.
    by_text = {q.text.strip(): str(stored[q.id]["expansion"]) for q in chosen}

    def reply(messages: list[dict[str, str]]) -> str:
        prompt = messages[-1]["content"]
        return by_text[max((text for text in by_text if text in prompt), key=len)]

    url = stack.enter_context(serve(ScriptedLLM(reply).app()))
    return f"{url}/v1", chosen


def _bool_clause(clause: TextClause, expansion: str) -> Any:
    return expanded_clause(clause, expansion, weight=5, combine="bool")


def _overhead(client: httpx.Client, answerbox: str, sample: list[Question], method: str) -> None:
    """A first pass fills the cache; then three searches per question are timed in turn.

    plain: the user's query, no pipeline (byte passthrough); same query: the expanded query
    the processor builds, passed through; empty pipeline: that query through a pipeline
    with no processors (the engine's own cost); pipeline: through the processor with a warm
    cache. The processor's cost is pipeline against empty pipeline; plain shows what the
    longer query costs OpenSearch.
    """
    expansions = {}
    for q in sample:
        response = client.post(f"{answerbox}/{INDEX}/_search?search_pipeline=qe_{method}", json=_body(q.text))
        expansions[q.id] = response.json()["ext"]["answerbox"]["query_expansion"]["expansion"]
    times: dict[str, list[float]] = {"plain": [], "same query": [], "empty pipeline": [], "pipeline": []}
    processor: list[float] = []
    for q in sample:
        expanded = _body(q.text)
        replace_text_clauses(expanded, q.text, functools.partial(_bool_clause, expansion=expansions[q.id]))
        for name, path, body in (
            ("plain", f"{INDEX}/_search", _body(q.text)),
            ("same query", f"{INDEX}/_search", expanded),
            ("empty pipeline", f"{INDEX}/_search?search_pipeline=empty", expanded),
            ("pipeline", f"{INDEX}/_search?search_pipeline=qe_{method}", _body(q.text)),
        ):
            started = time.perf_counter()
            response = client.post(f"{answerbox}/{path}", json=body)
            times[name].append((time.perf_counter() - started) * 1000)
        report = response.json()["ext"]["answerbox"]
        assert report["query_expansion"]["cached"], q.id
        processor.append(report["timings_ms"]["llm_query_expansion"])
    p50 = {name: statistics.median(values) for name, values in times.items()}
    print(
        f"\nwarm cache, {method}, {len(sample)} questions, p50 end to end: plain {p50['plain']:.2f} ms, "
        f"same expanded query passed through {p50['same query']:.2f} ms, through an empty pipeline "
        f"{p50['empty pipeline']:.2f} ms, "
        f"through the processor {p50['pipeline']:.2f} ms; processor / empty pipeline = "
        f"{p50['pipeline'] / p50['empty pipeline']:.3f} ({p50['pipeline'] - p50['empty pipeline']:+.2f} ms), "
        f"pipeline / plain = {p50['pipeline'] / p50['plain']:.2f}; "
        f"the processor's own time p50 {statistics.median(processor):.3f} ms, p95 "
        f"{sorted(processor)[int(0.95 * len(processor))]:.3f} ms"
    )


def _weights(
    client: httpx.Client, osmem: str, sample: list[Question], methods: Sequence[str], weights: Sequence[int]
) -> None:
    """The stored expansions re-scored with other query weights (no LLM call): how much weight is safe?"""
    bm25 = _results("bm25")
    print("\nquery weight (the paper: 5), repeat shape, from the stored expansions")
    for method in methods:
        rows = _results(method)
        chosen = [q for q in sample if q.id in rows]
        if not chosen:
            continue
        base = [bm25[q.id]["rank"] for q in chosen]
        for weight in weights:
            ranks = [_repeat_rank(client, osmem, q, rows[q.id]["expansion"], weight) for q in chosen]
            got = _metrics(ranks)
            print(
                f"  {method:<8} w={weight:<3} n={len(chosen):<4} R@10 {got['R@10']:.3f} MRR@10 "
                f"{got['MRR@10']:.3f}  {_paired(base, ranks)}"
            )


def _servers(stack: ExitStack, llm_url: str, contexts: list[str], client: httpx.Client) -> tuple[str, str]:
    osmem = OsmemServer.start(japanese=False)
    stack.callback(osmem.close)
    _index(client, osmem.url, contexts)
    settings = Settings.load(
        opensearch={"url": osmem.url},
        llm={"base_url": llm_url, "model": "smollm2", "timeout_s": 120},
        limits={"processor_timeout_s": 300, "pipeline_budget_s": 300},
    )
    answerbox = stack.enter_context(serve(create_app(settings)))
    for method in METHODS:
        pipeline = {"request_processors": [_processor(method)]}
        client.put(f"{answerbox}/_search/pipeline/qe_{method}", json=pipeline).raise_for_status()
    client.put(f"{answerbox}/_search/pipeline/empty", json={"description": "no processors"}).raise_for_status()
    return osmem.url, answerbox


def _sample(questions: list[Question], size: int, seed: int) -> list[Question]:
    return random.Random(seed).sample(questions, size)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=300)
    parser.add_argument("--seed", type=int, default=2023)
    parser.add_argument(
        "--full", nargs="*", default=["q2e_zs"], choices=METHODS, help="methods run on the whole sample first"
    )
    parser.add_argument(
        "--others", type=int, default=0, help="then the other methods, in turn, on the first N of the sample"
    )
    parser.add_argument("--until", default=None, help="UTC HH:MM after which no new question is started")
    parser.add_argument("--llm-url", default="http://127.0.0.1:8081/v1")
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument(
        "--weights", nargs="*", type=int, default=[], help="only re-score stored expansions with these query weights"
    )
    parser.add_argument(
        "--overhead", choices=METHODS, help="only time warm-cache searches of this method against plain ones"
    )
    args = parser.parse_args(argv)

    contexts, questions = _paragraphs()
    sample = _sample(questions, args.sample, args.seed)
    print(
        f"{len(contexts)} paragraphs, {len(questions)} questions; sample {len(sample)} (seed {args.seed})", flush=True
    )
    others = [m for m in METHODS if m not in args.full] if args.others else []
    until = _deadline(args.until)
    if args.weights:
        with ExitStack() as stack, httpx.Client(timeout=600) as client:
            osmem = OsmemServer.start(japanese=False)
            stack.callback(osmem.close)
            _index(client, osmem.url, contexts)
            _weights(client, osmem.url, sample, [*args.full, *others], args.weights)
    elif args.overhead:
        with ExitStack() as stack, httpx.Client(timeout=600) as client:
            llm_url, chosen = _replay_llm(stack, args.overhead, sample)
            _, answerbox = _servers(stack, llm_url, contexts, client)
            _overhead(client, answerbox, chosen[:100], args.overhead)
    else:
        if not args.report_only:
            with ExitStack() as stack, httpx.Client(timeout=600) as client:
                osmem, answerbox = _servers(stack, args.llm_url, contexts, client)
                _run_bm25(client, answerbox, sample)
                _run(client, answerbox, osmem, args.full, sample, until)
                _run(client, answerbox, osmem, others, sample[: args.others], until)
        _report(sample, [*args.full, *others])


def _deadline(hhmm: str | None) -> float:
    if hhmm is None:
        return float("inf")
    hours, minutes = map(int, hhmm.split(":"))
    return datetime.now(UTC).replace(hour=hours, minute=minutes, second=0).timestamp()


if __name__ == "__main__":
    main()
