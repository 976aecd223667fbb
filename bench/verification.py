"""Does a checked citation check the facts? The claim verifier measured, as issue 63 asks.

    python -m bench.verification [--limit 3000] [--end-to-end 200]

1. VitaminC's report side (titles never trained or chosen on, ``verifier_data.vitaminc_split``):
   the share of claims kept at the shipped threshold per gold label, the AUROC of P(entailment)
   between supported and refuted claims, and 3-way accuracy.
2. Contrastive claims of the held-out training articles: the share kept per kind (the
   answer's sentence, that sentence with one fact swapped, the question answered right or
   wrong, a sentence of another paragraph).
3. ms per claim: batches of ``BATCH`` claims, each against one short evidence window, p50.
4. End to end: answerbox over osmem-server, a stored ``cited_answer`` pipeline (generative,
   ``min_confidence`` 0, block [1] the gold paragraph), and a scripted LLM that answers with
   the paragraph's own sentence or that sentence with one fact swapped: the share of answers
   that keep their citation.

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
from osmem_server import OsmemServer

from bench.harness import ScriptedLLM, serve
from onnx_models.data.squad import TRAIN_FILES, default_tarball, in_holdout, load_squad
from onnx_models.data.verifier_pairs import HOLDOUT, Pair, contrastive_pairs, vitaminc_pairs
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


def _end_to_end(count: int) -> dict[str, float]:
    """The share of answers that keep their citation, for true and for swapped sentences."""
    paragraphs = [p for p in load_squad(TRAIN_FILES, default_tarball()) if in_holdout(p.article, HOLDOUT)]
    by_question = {q.text: p for p in paragraphs for q in p.questions}
    made = contrastive_pairs(default_tarball())["choose"]
    claims: dict[str, dict[str, str]] = {}
    for pair in made:
        if pair.kind in ("sentence", "swapped") and pair.question in by_question:
            claims.setdefault(pair.question, {})[pair.kind] = pair.claim
    asked = [q for q, c in claims.items() if len(c) == 2]
    asked = random.Random(0).sample(asked, min(count, len(asked)))
    replies: dict[str, str] = {}

    def reply(messages: list[dict[str, str]]) -> str:
        prompt = messages[-1]["content"]
        return next((text for question, text in replies.items() if question in prompt), "I do not know.")

    kept: dict[str, list[bool]] = {"sentence": [], "swapped": []}
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
            for kind in kept:
                replies.clear()
                replies[question] = f"{claims[question][kind].rstrip('.')} [1]."
                body = {
                    "query": {"ids": {"values": [by_question[question].id]}},
                    "ext": {"generative_qa_parameters": {"llm_question": question}},
                }
                found = client.post(f"{url}/{INDEX}/_search", params={"search_pipeline": "verify"}, json=body).json()
                answer = found["ext"]["answerbox"]["answer"] or {}
                kept[kind].append(bool(answer.get("citations")) and not answer.get("abstained"))
    return {kind: round(sum(v) / len(v), 4) for kind, v in kept.items() if v}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", type=Path, default=Path("onnx_models/verifier"))
    parser.add_argument("--limit", type=int, default=3000, help="pairs of each set judged (0: all)")
    parser.add_argument("--end-to-end", type=int, default=200, help="questions asked both ways (0: skip)")
    args = parser.parse_args()
    model_dir = args.model_dir
    threshold = _threshold(model_dir)
    report = sample(vitaminc_pairs(default_tarball())["report"], args.limit)
    made = sample(contrastive_pairs(default_tarball())["choose"], args.limit)
    result: dict[str, Any] = {
        "entailed_above": threshold,
        "vitaminc_report": summary("vitaminc report side", judge(verifier_of(model_dir), report), threshold),
        "contrastive_heldout": summary("held-out articles", judge(verifier_of(model_dir), made), threshold),
        "ms_per_claim_p50": round(_ms_per_claim(model_dir, report), 2),
    }
    if args.end_to_end:
        result["end_to_end_kept"] = _end_to_end(args.end_to_end)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
