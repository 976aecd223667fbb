"""Which evidence passage the featured snippet should read: choice rules compared on the same evidence.

    PYTHONPATH=plugin:. python -m bench.snippet_choice --sample 500 --seed 7

All 2,067 SQuAD v1.1 dev paragraphs go into osmem-server; answerbox runs the no-LLM pipeline
``retrieval_evaluator`` (top 10, rerank) → ``cited_answer`` (size 5, extractive). The bench
records the evidence ``cited_answer`` hands to ``featured_snippet`` and, on that same
evidence, applies each rule: the passage with the best

- ``score``: the evaluator's calibrated score (what ships);
- ``relevance + span``: relevance logit + the span's start+end logit (the rule before);
- ``relevance + span - null``: the same, minus the [CLS] no-answer logit of the window;
- ``rank``: the first passage of the pipeline's order.

Each is gated as the processor gates (score ≥ ``snippet_min_support``, 0). Prints, per rule,
the share answered, citation precision (the cited hit is the gold paragraph or holds a gold
answer, as in ``bench/answer_eval.py``) and SQuAD EM over all questions. Use a seed other than
answer_eval's 2023 to choose, so that bench stays a check.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import answerbox.processors.cited_answer.processor as cited_answer
import httpx
from answerbox.app import create_app
from answerbox.core.config import Settings
from answerbox.models import Models
from answerbox.models.reader import best_span
from answerbox.processors.answering.evidence import Evidence
from answerbox.processors.answering.extractive import Snippet
from osmem_server import OsmemServer

from bench.harness import SQUAD_INDEX, dev_paragraphs, match_body, serve
from onnx_models.data.squad import contains_gold, exact_match, index_with_titles, sample_questions

PIPELINE = {
    "response_processors": [
        {"retrieval_evaluator": {"top_n": 10, "rerank": True}},
        {"cited_answer": {"size": 5, "mode": "extractive"}},
    ]
}


@dataclass(frozen=True, slots=True)
class Candidate:
    id: str
    rank: int
    text: str
    score: float  # calibrated evaluator score
    relevance: float  # logit of the window read
    span: float  # start+end logit of the span
    null: float  # start+end logit of [CLS] in that window


RULES: dict[str, Callable[[Candidate], float]] = {
    "score (shipped)": lambda c: c.score,
    "relevance + span": lambda c: c.relevance + c.span,
    "relevance + span - null": lambda c: c.relevance + c.span - c.null,
    "rank": lambda c: -c.rank,
}


async def _candidates(question: str, evidence: Sequence[Evidence], models: Models) -> list[Candidate]:
    snippets = [e.snippet for e in evidence]
    per_passage = await models.encoder.encode(question, snippets)
    spans = await models.reader.read(question, snippets)
    scores = await models.evaluator.score(question, snippets)
    found = []
    for block, outputs, span, score in zip(evidence, per_passage, spans, scores, strict=True):
        read = max(outputs, key=lambda o: o.relevance)
        tokens = best_span(read, models.manifest.max_answer_tokens)
        if tokens is None or not span.text.strip() or read.start_logits is None or read.end_logits is None:
            continue
        span_logit = float(read.start_logits[tokens.first] + read.end_logits[tokens.last])
        null = float(read.start_logits[0] + read.end_logits[0])
        found.append(Candidate(block.id, block.rank, span.text, score, read.relevance, span_logit, null))
    return found


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=500)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--min-support", type=float, default=0.0, help="the gate (cited_answer's snippet_min_support)")
    args = parser.parse_args(argv)
    paragraphs = dev_paragraphs()
    texts = {p.id: p.context for p in paragraphs}
    sample = sample_questions(paragraphs, args.sample, args.seed)
    recorded: dict[str, list[Candidate]] = {}
    shipped = cited_answer.featured_snippet  # type: ignore[attr-defined]  # patched below, so not re-exported

    async def recording(question: str, evidence: Sequence[Evidence], models: Models, **options: Any) -> Snippet | None:
        recorded[question] = await _candidates(question, evidence, models)
        return await shipped(question, evidence, models, **options)

    cited_answer.featured_snippet = recording  # type: ignore[attr-defined]  # the processor looks it up at call time
    try:
        with ExitStack() as stack, httpx.Client(timeout=600) as client:
            osmem = OsmemServer.start(japanese=False)
            stack.callback(osmem.close)
            index_with_titles(client, osmem.url, paragraphs, SQUAD_INDEX)
            url = stack.enter_context(serve(create_app(Settings.load(opensearch={"url": osmem.url}, llm={}))))
            client.put(f"{url}/_search/pipeline/answers", json=PIPELINE).raise_for_status()
            for _, question in sample:
                client.post(
                    f"{url}/{SQUAD_INDEX}/_search?search_pipeline=answers", json=match_body(question.text)
                ).raise_for_status()
    finally:
        cited_answer.featured_snippet = shipped  # type: ignore[attr-defined]
    print(f"{len(sample)} questions (seed {args.seed}), gate {args.min_support}")
    for name, key in RULES.items():
        answered = right = 0
        em = 0.0
        for paragraph, question in sample:
            candidates = recorded.get(question.text)
            if not candidates:
                continue
            best = max(candidates, key=key)
            if best.score < args.min_support:
                continue
            answered += 1
            right += best.id == paragraph.id or contains_gold(texts[best.id], question.answers)
            em += exact_match(best.text, question.answers)
        n = len(sample)
        print(
            f"{name:<22} answered {100 * answered / n:5.1f}%  citation precision "
            f"{100 * right / max(answered, 1):5.1f}%  EM {100 * em / n:5.1f}"
        )


if __name__ == "__main__":
    main()
