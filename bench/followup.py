"""Follow-up questions through answerbox's conversation memory: does a question that says "it"
for what the question before it named find its paragraph, and its answer, as the question
asked alone cannot?

    PYTHONPATH=plugin:. python -m bench.followup --pairs 300
    PYTHONPATH=plugin:. python -m bench.followup --source new_wiki --llm

The pairs are ``bench/followup_pairs.py``'s (its docstring holds the rule): a first question
about a paragraph, and a second about the same paragraph with "it" for an entity the first
named. ``--source``:

- ``dev``: SQuAD v1.1 dev, all 2,067 paragraphs indexed; for reporting only;
- ``new_wiki``: squad_shifts new_wiki, every paragraph indexed, the pairs drawn from the
  articles that training held out (``--holdout``, as ``onnx_models.calibrate.answer_confidence`` picks
  them): the set to choose anything by.

osmem-server holds the paragraphs (index ``squad``, ``_id`` the paragraph id) and each search
runs through answerbox over HTTP (``_search``, BM25 on ``text``, the top 10), with the pipeline
``followup-rules`` (``conversation`` rewriting by rules, then ``retrieval_evaluator`` top 10
with rerank and an extractive ``cited_answer``) or ``followup-llm`` (the same, rewriting with
the local LLM, rules when it fails). Conditions, per pair:

- ``first``: the first question alone, no memory (``conversation`` leaves it as it is);
- ``alone``: the follow-up alone, no memory;
- ``original``: the second question as SQuAD asks it, no memory (the upper bound);
- ``rules``: a new memory; the first question, then the follow-up, with it, by
  ``followup-rules`` (the row is the follow-up's, with the standalone question and method);
- ``llm``: the same by ``followup-llm`` (``--llm``; the sample's first ``--llm-pairs``).

It prints, per condition, the pairs, R@1 and R@10 (the gold paragraph among the hits) and
contains-gold (the answer's text holds a gold answer, SQuAD normalisation; an abstained
answer is none), then the acceptance lines: ``rules R@10 - first R@10`` (target >= -5 points:
the memory costs little against a question that names its entity) and ``rules R@10 - alone
R@10`` (target >= +15: the memory recovers what "it" lost), and the same for ``llm``, each
over the pairs both conditions ran. Rows go to
``$ANSWERBOX_BENCH_DIR/followup/<source>-<condition>.jsonl`` so a run resumes;
``--report-only`` prints from them.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx
from answerbox.app import create_app
from answerbox.core.config import Settings
from answerbox.ops.embedded import local_llm
from osmem_server import OsmemServer

from bench.followup_pairs import FollowUp, follow_ups, sample_pairs
from bench.harness import BENCH_DIR, SQUAD_INDEX, dev_paragraphs, free_port, match_body, serve
from onnx_models.data.squad import (
    Paragraph,
    Question,
    contains_gold,
    held_out,
    holdout_fraction,
    index_with_titles,
    load_squad,
)
from onnx_models.evaluate.rows import Row, load_rows, resume

NEW_WIKI = "new_wiki_v1.0.json"
SOURCES = ("dev", "new_wiki")
CONDITIONS = ("first", "alone", "original", "rules", "llm")
# The pipeline each condition searches with: the conversation processor rewrites only with a memory.
PIPELINE_OF = {
    "first": "followup-rules",
    "alone": "followup-rules",
    "original": "followup-rules",
    "rules": "followup-rules",
    "llm": "followup-llm",
}
# Acceptance: rules' (or llm's) R@10 minus the condition's, in points, at least this.
TARGETS = {"first": -5.0, "alone": 15.0}


def pipeline(rewrite: str) -> dict[str, Any]:
    return {
        "request_processors": [{"conversation": {"rewrite": rewrite}}],
        "response_processors": [
            {"retrieval_evaluator": {"top_n": 10, "rerank": True}},
            {"cited_answer": {"size": 5, "mode": "extractive"}},
        ],
    }


PIPELINES = {"followup-rules": pipeline("rules"), "followup-llm": pipeline("auto")}


def corpus(source: str, holdout: float, data: Path | None) -> tuple[list[Paragraph], list[Paragraph]]:
    """The paragraphs to index, and those to draw the pairs from."""
    if source == "dev":
        paragraphs = dev_paragraphs()
        return paragraphs, paragraphs
    paragraphs = load_squad([NEW_WIKI], data)
    return paragraphs, held_out(paragraphs, holdout)


@dataclass(frozen=True, slots=True)
class Searched:
    ids: list[str]  # the hits' _id, best first
    answer: dict[str, Any] | None
    conversation: dict[str, Any] | None
    seconds: float


def search(client: httpx.Client, url: str, question: str, pipeline: str, memory_id: str | None = None) -> Searched:
    body = match_body(question)
    if memory_id is not None:
        body["ext"] = {"generative_qa_parameters": {"memory_id": memory_id}}
    started = time.perf_counter()
    response = client.post(f"{url}/{SQUAD_INDEX}/_search", params={"search_pipeline": pipeline}, json=body)
    response.raise_for_status()
    found = response.json()
    box = (found.get("ext") or {}).get("answerbox") or {}
    ids = [hit["_id"] for hit in found["hits"]["hits"]]
    return Searched(ids, box.get("answer"), box.get("conversation"), time.perf_counter() - started)


def new_memory(client: httpx.Client, url: str, name: str) -> str:
    response = client.post(f"{url}/_plugins/_ml/memory", json={"name": name})
    response.raise_for_status()
    return str(response.json()["memory_id"])


def _rank(searched: Searched, paragraph: Paragraph) -> int | None:
    """The gold paragraph's 1-based rank among the hits, None when it is not there."""
    return searched.ids.index(paragraph.id) + 1 if paragraph.id in searched.ids else None


def _row(pair: FollowUp, question: Question, searched: Searched) -> Row:
    answer = searched.answer or {}
    text = "" if answer.get("abstained") else str(answer.get("text") or "")
    return {
        "id": pair.follow_up.id,
        "asked": question.text,
        "rank": _rank(searched, pair.paragraph),
        "answer": text,
        "right": bool(text) and contains_gold(text, question.answers),
        "seconds": round(searched.seconds, 4),
    }


def _alone(client: httpx.Client, url: str, condition: str) -> Callable[[FollowUp], Row]:
    """A condition's question searched with no memory."""

    def question(pair: FollowUp) -> Question:
        if condition == "first":
            return pair.first
        return pair.follow_up if condition == "alone" else replace(pair.follow_up, text=pair.original_follow_up)

    return lambda pair: _row(pair, question(pair), search(client, url, question(pair).text, PIPELINE_OF[condition]))


def _remembered(client: httpx.Client, url: str, condition: str) -> Callable[[FollowUp], Row]:
    """The first question then the follow-up, with a memory of their own."""

    def produce(pair: FollowUp) -> Row:
        memory_id = new_memory(client, url, pair.follow_up.id)
        first = search(client, url, pair.first.text, PIPELINE_OF[condition], memory_id)
        then = search(client, url, pair.follow_up.text, PIPELINE_OF[condition], memory_id)
        conversation = then.conversation or {}
        return _row(pair, pair.follow_up, then) | {
            "memory_id": memory_id,
            "first_rank": _rank(first, pair.paragraph),
            "standalone_question": conversation.get("standalone_question"),
            "method": conversation.get("method"),
            "history": conversation.get("history"),
        }

    return produce


def _rows_path(source: str, condition: str) -> Path:
    return BENCH_DIR / "followup" / f"{source}-{condition}.jsonl"


def run(client: httpx.Client, url: str, source: str, condition: str, pairs: Sequence[FollowUp]) -> list[Row]:
    by_id = {pair.follow_up.id: pair for pair in pairs}
    produce = _remembered(client, url, condition) if condition in ("rules", "llm") else _alone(client, url, condition)
    return resume(
        _rows_path(source, condition),
        [p.follow_up for p in pairs],
        lambda q: produce(by_id[q.id]),
        label=f"{condition} over {source}",
    )


def _put_pipeline(client: httpx.Client, url: str, name: str) -> None:
    response = client.put(f"{url}/_search/pipeline/{name}", json=PIPELINES[name])
    if response.is_error:  # say why: the conversation processor may be missing or configured otherwise
        raise SystemExit(f"PUT _search/pipeline/{name}: {response.status_code} {response.text}")


def _load(source: str, condition: str, pairs: Sequence[FollowUp]) -> list[Row]:
    """The condition's rows of these pairs, those that ran."""
    done = load_rows(_rows_path(source, condition))
    return [done[p.follow_up.id] for p in pairs if p.follow_up.id in done]


def recall(rows: Sequence[Row], k: int) -> float:
    """The share of rows, in points, whose gold paragraph is among the top ``k``."""
    return 100 * sum(r["rank"] is not None and r["rank"] <= k for r in rows) / len(rows) if rows else float("nan")


def report(rows: dict[str, list[Row]]) -> None:
    print(f"\n{'condition':<10} {'n':>5} {'R@1':>6} {'R@10':>6} {'gold':>6}  rewritten by")
    for condition, found in rows.items():
        if not found:
            continue
        right = 100 * sum(r["right"] for r in found) / len(found)
        methods = dict(Counter(r["method"] for r in found)) if condition in ("rules", "llm") else ""
        print(
            f"{condition:<10} {len(found):>5} {recall(found, 1):>6.1f} {recall(found, 10):>6.1f} "
            f"{right:>6.1f}  {methods}"
        )
    print()
    for variant in ("rules", "llm"):
        for base, target in TARGETS.items():
            if not rows.get(variant) or not rows.get(base):
                continue
            # Over the pairs both ran: llm runs on the sample's first pairs only.
            common = {r["id"] for r in rows[variant]} & {r["id"] for r in rows[base]}
            delta = recall([r for r in rows[variant] if r["id"] in common], 10) - recall(
                [r for r in rows[base] if r["id"] in common], 10
            )
            verdict = "met" if delta >= target else "NOT met"
            print(
                f"{variant} R@10 - {base} R@10: {delta:+.1f} points over {len(common)} pairs (target >= "
                f"{target:+.0f}): {verdict}"
            )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", choices=SOURCES, default="dev")
    parser.add_argument("--pairs", type=int, default=300)
    parser.add_argument("--seed", type=int, default=2023)
    parser.add_argument(
        "--holdout", type=holdout_fraction, default=0.1, help="new_wiki: the share of articles that training held out"
    )
    parser.add_argument(
        "--data", type=Path, default=None, help="new_wiki: the bigbench tarball (default: in $ANSWERBOX_DATA_DIR)"
    )
    parser.add_argument("--llm", action="store_true", help="also the llm condition, with the local LLM (or --llm-url)")
    parser.add_argument("--llm-pairs", type=int, default=200, help="pairs (the sample's first) for the llm condition")
    parser.add_argument(
        "--llm-url", default=None, help="an OpenAI-compatible /v1 URL (default: the local LLM, started here)"
    )
    parser.add_argument("--llm-model", default="smollm2")
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args(argv)

    indexed, pool = corpus(args.source, args.holdout, args.data)
    pairs = sample_pairs(pool, args.pairs, args.seed)
    print(
        f"{args.source}: {len(indexed)} paragraphs indexed, {len(follow_ups(pool))} pairs by the rule, "
        f"{len(pairs)} asked; {vars(args)}",
        flush=True,
    )
    asked = {c: pairs[: args.llm_pairs] if c == "llm" else pairs for c in CONDITIONS if c != "llm" or args.llm}

    if not args.report_only:
        with ExitStack() as stack, httpx.Client(timeout=600) as client:
            osmem = stack.enter_context(OsmemServer.start(japanese=False))
            index_with_titles(client, osmem.url, indexed, SQUAD_INDEX)
            llm_url = (args.llm_url or stack.enter_context(local_llm(free_port()))) if args.llm else None
            llm = {"base_url": llm_url, "model": args.llm_model} if llm_url else {}
            url = stack.enter_context(serve(create_app(Settings.load(opensearch={"url": osmem.url}, llm=llm))))
            for name in {PIPELINE_OF[c] for c in asked}:
                _put_pipeline(client, url, name)
                search(client, url, "warm up", name)
            for condition, chosen in asked.items():
                run(client, url, args.source, condition, chosen)
    report({condition: _load(args.source, condition, chosen) for condition, chosen in asked.items()})


if __name__ == "__main__":
    main()
