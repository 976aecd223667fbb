"""Does a checked citation check the facts? The claim verifier measured, as issue 63 asks.

    python -m bench.verification [--limit 3000] [--end-to-end 200] [--claims heldout|sample]

1. VitaminC's report side (titles never trained or chosen on, ``verifier_data.vitaminc_split``):
   the share of claims kept at the shipped threshold per gold label, the AUROC of P(entailment)
   between supported and refuted claims, and 3-way accuracy.
2. Contrastive claims of the held-out training articles: the share kept per kind (the
   answer's sentence, that sentence with one fact swapped, the question answered right or
   wrong, a sentence of another paragraph).
3. ms per claim: batches of ``BATCH`` claims, each against one short evidence window, p50.
4. End to end: answerbox over osmem-server, a stored ``cited_answer`` pipeline (generative,
   ``min_confidence`` 0, block [1] the gold paragraph), and a scripted LLM that answers with
   the paragraph's own sentence, that sentence with one fact swapped, a number or a month changed,
   a direction flipped, two names exchanged or another paragraph's sentence appended, or the
   question's statement with the right or a wrong answer (``END_TO_END_KINDS``): the share of
   answers that keep their citation, and of those flagged ``contradicted``, per kind, and whether
   that share should be high or low (``kept_should_be``). The sentences are the held-out
   training articles' (``--claims heldout``), or the embedded default's sample of SQuAD dev
   (``--claims sample``: reporting only, and it runs without the tarball).

5. With ``--llm-answers N``: the LLM at ``--llm-url`` (``answerbox local-llm`` by default) answers
   N of the sample's questions from BM25's top 3; every claim flagged ``contradicted`` is printed
   with the sentence it misquotes, so a reader can judge whether the flags are right.

Without a verifier in ``--model-dir``, 1 to 3 are skipped: end to end then measures the check
without it (the evaluator's score, the words shared, and misquotes).

Selective answering before and after is ``python -m bench.selective``'s, run on each commit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
from answerbox.app import create_app
from answerbox.core.config import Settings
from answerbox.processors.text.claims import entailments
from opensearchpy import OpenSearch
from osmem_server import OsmemServer

from bench.harness import ScriptedLLM, index_paragraphs, match_body, sample_corpus, serve
from onnx_models.data.squad import TRAIN_FILES, Paragraph, default_tarball, in_holdout, load_squad
from onnx_models.data.verifier_pairs import HOLDOUT, Pair, articles_pairs, contrastive_pairs, vitaminc_pairs
from onnx_models.evaluate.verifier import judge, sample, summary, verifier_of

BATCH = 8
INDEX = "heldout"


def _threshold(model_dir: Path) -> float:
    return float(json.loads((model_dir / "verifier.json").read_text())["entailed_above"])


def _ms_per_claim(model_dir: Path, pairs: list[Pair], batches: int = 50) -> float:
    verifier = verifier_of(model_dir)

    async def run() -> list[float]:
        timed = []
        for b in range(batches):
            chunk = pairs[b * BATCH : (b + 1) * BATCH]
            started = time.perf_counter()
            await entailments(verifier, [(p.evidence, p.claim) for p in chunk])
            timed.append((time.perf_counter() - started) * 1000 / len(chunk))
        verifier.close()
        return timed

    return statistics.median(asyncio.run(run()))


def _true_and_swapped(claims_from: str) -> tuple[list[Paragraph], list[Pair]]:
    """The paragraphs and their contrastive pairs: the held-out training articles' (what the check's
    constants are chosen on), or the embedded default's sample of SQuAD dev (reporting only; it
    needs no tarball)."""
    if claims_from == "sample":
        paragraphs = sample_corpus()
        return paragraphs, [pair for _, pair in articles_pairs(paragraphs, random.Random(13))]
    paragraphs = [p for p in load_squad(TRAIN_FILES, default_tarball()) if in_holdout(p.article, HOLDOUT)]
    return paragraphs, contrastive_pairs(default_tarball())["choose"]


# What the scripted LLM answers with, and whether an answer that keeps it with its citation is
# right: the paragraph's own sentence (kept: right); it with the answer swapped for another of the
# paragraph's, its first number one more, its first month the next, its first direction word the
# opposite, or two of its names exchanged (kept: wrong, each is contradicted); it with a sentence of
# another paragraph appended (kept: wrong, the block says half of it); the question's statement with
# the right answer (kept: right), and with another answer of the paragraph (kept: wrong).
END_TO_END_KINDS = {
    "sentence": True,
    "swapped": False,
    "number_changed": False,
    "date_changed": False,
    "comparative_flipped": False,
    "roles_exchanged": False,
    "clause_appended": False,
    "question": True,
    "question_wrong": False,
}


def _end_to_end(count: int, claims_from: str) -> dict[str, dict[str, Any]]:
    """The share of answers that keep their citation, and of those flagged contradicted, for
    true and for swapped sentences."""
    paragraphs, made = _true_and_swapped(claims_from)
    by_question = {q.text: p for p in paragraphs for q in p.questions}
    claims: dict[str, dict[str, str]] = {}
    for pair in made:
        if pair.kind in END_TO_END_KINDS and pair.question in by_question:
            claims.setdefault(pair.question, {})[pair.kind] = pair.claim
    asked = [q for q, c in claims.items() if "sentence" in c and "swapped" in c]
    asked = random.Random(0).sample(asked, min(count, len(asked)))
    replies: dict[str, str] = {}

    def reply(messages: list[dict[str, str]]) -> str:
        prompt = messages[-1]["content"]
        return next((text for question, text in replies.items() if question in prompt), "I do not know.")

    kept: dict[str, list[bool]] = {kind: [] for kind in END_TO_END_KINDS}
    contradicted: dict[str, list[bool]] = {kind: [] for kind in END_TO_END_KINDS}
    with ExitStack() as stack, httpx.Client(timeout=120) as client:
        osmem = stack.enter_context(OsmemServer.start(japanese=False))
        llm = stack.enter_context(serve(ScriptedLLM(reply).app()))
        url = stack.enter_context(
            serve(create_app(Settings.load(opensearch={"url": osmem.url}, llm={"base_url": f"{llm}/v1"})))
        )
        gold = {by_question[q].id for q in asked}
        lines: list[str] = []
        for p in paragraphs:
            if p.id in gold:
                lines += [json.dumps({"index": {"_index": INDEX, "_id": p.id}}), json.dumps({"text": p.context})]
        headers = {"content-type": "application/x-ndjson"}
        client.post(f"{osmem.url}/_bulk?refresh=true", content="\n".join(lines) + "\n", headers=headers)
        pipeline = {
            "response_processors": [
                {"cited_answer": {"mode": "generative", "min_confidence": 0, "size": 1, "attribute_uncited": False}}
            ]
        }
        client.put(f"{url}/_search/pipeline/verify", json=pipeline).raise_for_status()
        for question in asked:
            for kind in (k for k in kept if k in claims[question]):
                replies.clear()
                replies[question] = f"{claims[question][kind].rstrip('.')} [1]."
                body = {
                    "query": {"ids": {"values": [by_question[question].id]}},
                    "ext": {"generative_qa_parameters": {"llm_question": question}},
                }
                found = client.post(f"{url}/{INDEX}/_search", params={"search_pipeline": "verify"}, json=body).json()
                answer = found["ext"]["answerbox"]["answer"] or {}
                kept[kind].append(bool(answer.get("citations")) and not answer.get("abstained"))
                flagged = answer.get("flagged") or []
                contradicted[kind].append(any(f["reason"] == "contradicted" for f in flagged))
    return {
        "questions": {"asked": len(asked)},
        "kept": {kind: round(sum(v) / len(v), 4) for kind, v in kept.items() if v},
        "contradicted": {kind: round(sum(v) / len(v), 4) for kind, v in contradicted.items() if v},
        "kept_should_be": {kind: "high" if right else "low" for kind, right in END_TO_END_KINDS.items() if kept[kind]},
    }


def _llm_answers(count: int, llm_url: str) -> dict[str, Any]:
    """The real LLM's answers to the sample's questions (SQuAD dev: reporting only), BM25's top 3
    as evidence: each (claim, citation) pair the check kept or flagged, by reason, and every claim
    flagged ``contradicted`` with the sentence it misquotes, for a reader to judge."""
    paragraphs = sample_corpus()
    asked = [q.text for p in paragraphs for q in p.questions]
    asked = random.Random(0).sample(asked, min(count, len(asked)))
    verdicts: dict[str, int] = {"kept": 0}
    contradicted: list[dict[str, str]] = []
    with ExitStack() as stack, httpx.Client(timeout=300) as client:
        osmem = stack.enter_context(OsmemServer.start(japanese=False))
        index_paragraphs(OpenSearch(osmem.url), INDEX, paragraphs)
        settings = Settings.load(opensearch={"url": osmem.url}, llm={"base_url": llm_url})
        url = stack.enter_context(serve(create_app(settings)))
        pipeline = {"response_processors": [{"cited_answer": {"mode": "generative", "min_confidence": 0, "size": 3}}]}
        client.put(f"{url}/_search/pipeline/verify", json=pipeline).raise_for_status()
        for question in asked:
            body = {**match_body(question), "ext": {"generative_qa_parameters": {"llm_question": question}}}
            found = client.post(f"{url}/{INDEX}/_search", params={"search_pipeline": "verify"}, json=body).json()
            answer = found["ext"]["answerbox"]["answer"] or {}
            verdicts["kept"] += len(answer.get("citations") or [])
            for flag in answer.get("flagged") or []:
                verdicts[flag["reason"]] = verdicts.get(flag["reason"], 0) + 1
                if flag["reason"] == "contradicted":
                    contradicted.append({"question": question, "claim": flag["sentence"], "quote": flag["quote"]})
    return {"questions": len(asked), "citations": verdicts, "contradicted": contradicted}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", type=Path, default=Path("onnx_models/verifier"))
    parser.add_argument("--limit", type=int, default=3000, help="pairs of each set judged (0: all)")
    parser.add_argument("--end-to-end", type=int, default=200, help="questions asked both ways (0: skip)")
    parser.add_argument(
        "--claims",
        choices=("heldout", "sample"),
        default="heldout",
        help="end to end: the held-out training articles' sentences, or the embedded sample's (SQuAD dev: report only)",
    )
    parser.add_argument(
        "--llm-answers", type=int, default=0, help="questions of the sample the LLM at --llm-url answers (0: skip)"
    )
    parser.add_argument("--llm-url", default="http://127.0.0.1:18081/v1", help="an OpenAI-compatible endpoint")
    args = parser.parse_args()
    model_dir = args.model_dir
    result: dict[str, Any] = {}
    if (model_dir / "manifest.json").exists():
        threshold = _threshold(model_dir)
        report = sample(vitaminc_pairs(default_tarball())["report"], args.limit)
        made = sample(contrastive_pairs(default_tarball())["choose"], args.limit)
        result |= {
            "entailed_above": threshold,
            "vitaminc_report": summary("vitaminc report side", judge(verifier_of(model_dir), report), threshold),
            "contrastive_heldout": summary("held-out articles", judge(verifier_of(model_dir), made), threshold),
            "ms_per_claim_p50": round(_ms_per_claim(model_dir, report), 2),
        }
    else:
        result["verifier"] = f"none in {model_dir}: end to end is the check without it"
    if args.end_to_end:
        result[f"end_to_end_{args.claims}"] = _end_to_end(args.end_to_end, args.claims)
    if args.llm_answers:
        result["llm_answers_sample"] = _llm_answers(args.llm_answers, args.llm_url)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
