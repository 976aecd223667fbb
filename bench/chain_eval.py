"""SearChain (``chain_of_query``) on SQuAD v1.1 dev with the real local LLM, end to end through answerbox.

    cd /work/main && /root/.cache/answerbox/venv/bin/python -m bench.chain_eval --one-hop 200 --two-hop 100

Starts osmem-server and answerbox (uvicorn, in this process), indexes every dev paragraph
as ``squad`` (field ``text``), and asks one-hop questions (a seeded sample of dev) and
two-hop questions composed by ``bench.twohop``, one at a time (the local LLM serves one
request at a time). Each question is a BM25 ``match`` search through an inline pipeline
running only ``chain_of_query``.

Printed per set: answer accuracy without verification (the first chain the LLM wrote,
before any IR feedback: its final answer, else its last answered node) and with it (the
presented final answer; an abstention counts as wrong; and, to price abstention, of the
final content even when it was not presented), as cover-EM (the normalised
gold answer stands in the prediction, as the paper scores) and EM; the abstention rate;
rounds, LLM calls and tokens per question; how the run stopped; and the share of checked
nodes kept / corrected / completed (the paper's Table 2). Per-question reports go to
``/root/.cache/answerbox/bench/chain_eval-<set>.jsonl``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from answerbox.app import create_app
from answerbox.core.config import ModelSettings, Settings
from answerbox.processors.chain_of_query.parser import final_answer
from answerbox.processors.text.normalize import normalize_answer
from opensearchpy import OpenSearch
from osmem_server import OsmemServer

from bench.harness import dev_paragraphs, index_paragraphs, serve
from bench.twohop import compose
from onnx_models.data.squad import exact_match, sample_questions

OUT = Path("/root/.cache/answerbox/bench")


@dataclass(frozen=True, slots=True)
class Item:
    id: str
    text: str
    answers: tuple[str, ...]


def cover_em(prediction: str, golds: Sequence[str]) -> float:
    found = f" {normalize_answer(prediction)} "
    return max(float(bool(normalize_answer(g)) and f" {normalize_answer(g)} " in found) for g in golds)


def unverified_answer(chain: dict[str, Any]) -> str:
    """What the LLM alone answered: the first chain's final answer, else its last answered node."""
    first = chain["tree"][0] if chain["tree"] else None
    if first is None:
        return ""
    if first["final_content"]:
        return final_answer(first["final_content"])
    answered = [n["answer"] for n in first["nodes"] if n["answer"]]
    return answered[-1] if answered else ""


async def ask(http: httpx.AsyncClient, url: str, item: Item, config: dict[str, Any]) -> dict[str, Any]:
    body = {
        "query": {"match": {"text": item.text}},
        "size": 3,
        "search_pipeline": {"response_processors": [{"chain_of_query": config}]},
    }
    started = time.perf_counter()
    response = await http.post(f"{url}/squad/_search", json=body)
    # A failed search is a wrong answer, not the end of the run.
    report = response.json().get("ext", {}).get("answerbox", {}) if response.status_code == 200 else {}
    return {
        "id": item.id,
        "question": item.text,
        "answers": item.answers,
        "millis": (time.perf_counter() - started) * 1000,
        "status": response.status_code,
        "warnings": report.get("warnings", [response.text[:300]]),
        "chain": report.get("chain") or {},
    }


def schedule(sets: dict[str, list[Item]]) -> list[tuple[str, Item]]:
    """Both sets interleaved in proportion, so a run cut by its deadline still samples both."""
    placed = [
        (position / len(items), name, item) for name, items in sets.items() for position, item in enumerate(items)
    ]
    return [(name, item) for _, name, item in sorted(placed, key=lambda p: p[0])]


async def run_all(
    url: str, sets: dict[str, list[Item]], config: dict[str, Any], deadline: float
) -> dict[str, list[dict[str, Any]]]:
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in sets}
    sinks = {name: (OUT / f"chain_eval-{name}.jsonl").open("w") for name in sets}
    try:
        async with httpx.AsyncClient(timeout=None) as http:
            for name, item in schedule(sets):
                if time.monotonic() > deadline:
                    break
                result = await ask(http, url, item, config)
                sinks[name].write(json.dumps(result) + "\n")
                sinks[name].flush()
                results[name].append(result)
    finally:
        for sink in sinks.values():
            sink.close()
    return results


def corrections(results: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Corrected nodes by whether the LLM's answer and the reader's span hold a gold answer.

    Alias matching (calling an LLM answer and a differently worded span equal) could only
    help where a correction replaced a right LLM answer with a wrong span: ``llm_right_reader_wrong``
    bounds what it can save. Gold answers are the question's, so this is read on one-hop sets.
    """
    counts: collections.Counter[str] = collections.Counter()
    for r in results:
        for node in r["chain"].get("nodes", []):
            if node["action"] == "correct":
                llm = "llm_right" if cover_em(node["llm_answer"] or "", r["answers"]) else "llm_wrong"
                reader = "reader_right" if cover_em(node["reader_answer"] or "", r["answers"]) else "reader_wrong"
                counts[f"{llm}_{reader}"] += 1
    return dict(sorted(counts.items()))


def summarise(name: str, results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    n = len(results)
    chains = [r["chain"] for r in results]
    presented = [c.get("final_answer") or "" for c in chains]
    # What the chain wrote last, presented or not: how much abstention costs.
    traced = [final_answer(c.get("final_content") or c.get("unverified_content") or "") for c in chains]
    alone = [unverified_answer(c) if c.get("tree") else "" for c in chains]
    golds = [r["answers"] for r in results]
    sources = collections.Counter(node["source"] for c in chains for node in c.get("nodes", []))
    nodes = sum(sources.values()) or 1
    llm = [c.get("llm", {}) for c in chains]
    return {
        "set": name,
        "questions": n,
        "cover_em_without_verification": round(
            statistics.fmean(cover_em(p, g) for p, g in zip(alone, golds, strict=True)), 4
        ),
        "cover_em_with_verification": round(
            statistics.fmean(cover_em(p, g) for p, g in zip(presented, golds, strict=True)), 4
        ),
        "cover_em_traced_even_if_abstained": round(
            statistics.fmean(cover_em(p, g) for p, g in zip(traced, golds, strict=True)), 4
        ),
        "em_without_verification": round(
            statistics.fmean(exact_match(p, g) for p, g in zip(alone, golds, strict=True)), 4
        ),
        "em_with_verification": round(
            statistics.fmean(exact_match(p, g) for p, g in zip(presented, golds, strict=True)), 4
        ),
        "abstained": round(statistics.fmean(float(c.get("abstained", True)) for c in chains), 4),
        "verified": round(statistics.fmean(float(c.get("verified", False)) for c in chains), 4),
        "rounds_per_question": round(statistics.fmean(c.get("rounds", 0) for c in chains), 3),
        "llm_calls_per_question": round(statistics.fmean(u.get("calls", 0) for u in llm), 3),
        "prompt_tokens_per_question": round(statistics.fmean(u.get("prompt_tokens", 0) for u in llm), 1),
        "completion_tokens_per_question": round(statistics.fmean(u.get("completion_tokens", 0) for u in llm), 1),
        "seconds_per_question": round(statistics.fmean(r["millis"] for r in results) / 1000, 2),
        "stopped": dict(collections.Counter(c.get("stopped") for c in chains)),
        "malformed_rounds_share": round(
            sum(b["malformed"] for c in chains for b in c.get("tree", []))
            / max(1, sum(len(c.get("tree", [])) for c in chains)),
            4,
        ),
        # Rounds whose reply ran into max_tokens: read up to the cut (a cut-off answer is unsolved).
        "cut_off_rounds_share": round(
            sum(b.get("cut_off", False) for c in chains for b in c.get("tree", []))
            / max(1, sum(len(c.get("tree", [])) for c in chains)),
            4,
        ),
        "nodes_checked": sum(sources.values()),
        "node_share": {s: round(sources.get(s, 0) / nodes, 4) for s in ("llm", "corrected", "completed")},
        "corrections": corrections(results),
        "nodes_verified_share": round(sum(node["verified"] for c in chains for node in c.get("nodes", [])) / nodes, 4),
    }


def items(args: argparse.Namespace) -> tuple[list[Item], list[Item]]:
    paragraphs = dev_paragraphs()
    one = [Item(q.id, q.text, q.answers) for _, q in sample_questions(paragraphs, args.one_hop, args.seed)]
    two = [Item(t.id, t.text, t.answers) for t in compose(paragraphs, args.two_hop, args.seed)]
    return one, two


def load_results() -> dict[str, list[dict[str, Any]]]:
    """The last run's per-question files, to summarise again without running."""
    return {
        name: [json.loads(line) for line in (OUT / f"chain_eval-{name}.jsonl").read_text().splitlines() if line.strip()]
        for name in ("one_hop", "two_hop")
    }


def bench(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    one_hop, two_hop = items(args)
    # skip_llm_above 1: the chain runs for every question, not only where the reader is unsure.
    config = {"r_max": args.r_max, "budget_s": args.budget_s, "max_tokens": args.max_tokens, "skip_llm_above": 1}
    deadline = time.monotonic() + args.minutes * 60
    with OsmemServer.start(japanese=False) as server, server.clone() as clone:
        index_paragraphs(OpenSearch(hosts=[clone.url], timeout=120), "squad", dev_paragraphs())
        settings = Settings.load(
            opensearch={"url": clone.url},
            llm={"base_url": args.llm, "timeout_s": args.llm_timeout_s},
            models={"dir": str(args.models_dir)},
            limits={"processor_timeout_s": args.budget_s + 30, "pipeline_budget_s": args.budget_s + 30},
        )
        with serve(create_app(settings)) as url:
            return asyncio.run(run_all(url, {"one_hop": one_hop, "two_hop": two_hop}, config, deadline))


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--one-hop", type=int, default=200)
    parser.add_argument("--two-hop", type=int, default=100)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--r-max", type=int, default=3)
    parser.add_argument("--budget-s", type=float, default=360.0)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--minutes", type=float, default=60.0, help="wall-clock cap for both sets together")
    parser.add_argument("--llm", default="http://127.0.0.1:8081/v1")
    parser.add_argument("--llm-timeout-s", type=float, default=300.0)
    parser.add_argument("--models-dir", type=Path, default=ModelSettings().dir)
    parser.add_argument("--report", action="store_true", help="only summarise the last run's per-question files")
    return parser.parse_args(argv)


if __name__ == "__main__":
    args = parse_args()
    started = time.perf_counter()
    results = load_results() if args.report else bench(args)
    summaries = [summarise(name, rows) for name, rows in results.items() if rows]
    for summary in summaries:
        print(json.dumps(summary), flush=True)
    manifest = json.loads((args.models_dir / "manifest.json").read_text())
    print(f"theta={manifest['theta']}  r_max={args.r_max}  max_tokens={args.max_tokens}  model={args.models_dir}")
    for s in summaries:
        print(
            f"{s['set']:>8} n={s['questions']}: cover-EM {s['cover_em_without_verification']:.3f}"
            f" → {s['cover_em_with_verification']:.3f}"
            f"  EM {s['em_without_verification']:.3f} → {s['em_with_verification']:.3f}  abstained {s['abstained']:.3f}"
            f"  rounds {s['rounds_per_question']}  calls {s['llm_calls_per_question']}"
            f"  tokens {s['prompt_tokens_per_question']}+{s['completion_tokens_per_question']}"
            f"  nodes kept/corrected/completed {s['node_share']}  {s['seconds_per_question']} s/q"
        )
    print(f"wall {time.perf_counter() - started:.0f} s")
