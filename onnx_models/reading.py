"""The reader's EM and F1 on SQuAD-format questions, each read against its gold paragraph.

Shared by ``bench/reader_eval.py`` (dev questions) and ``onnx_models/select_average.py`` (held-out
training articles), so checkpoints are chosen on exactly what the bench measures. Goes
through the public runtime API (``load_models`` → ``reader.read``), micro-batcher included.
"""

from __future__ import annotations

import asyncio
import time

from answerbox.models import Models, ReaderSpan

from onnx_models.squad import Paragraph, Question, contains_gold, cut_short, exact_match, f1_score

__all__ = ["evaluate"]


async def _read_all(models: Models, questions: list[tuple[Paragraph, Question]], concurrency: int) -> list[ReaderSpan]:
    gate = asyncio.Semaphore(concurrency)

    async def one(paragraph: Paragraph, question: Question) -> ReaderSpan:
        async with gate:
            [span] = await models.reader.read(question.text, [paragraph.context])
            return span

    return await asyncio.gather(*(one(p, q) for p, q in questions))


def evaluate(models: Models, questions: list[tuple[Paragraph, Question]], concurrency: int = 16) -> dict[str, float]:
    started = time.perf_counter()
    spans = asyncio.run(_read_all(models, questions, concurrency))
    seconds = time.perf_counter() - started
    em = sum(exact_match(s.text, q.answers) for s, (_, q) in zip(spans, questions, strict=True))
    f1 = sum(f1_score(s.text, q.answers) for s, (_, q) in zip(spans, questions, strict=True))
    contains = sum(contains_gold(s.text, q.answers) for s, (_, q) in zip(spans, questions, strict=True))
    short = sum(cut_short(s.text, q.answers) for s, (_, q) in zip(spans, questions, strict=True))
    n = len(questions)
    return {
        "questions": n,
        "em": round(100 * em / n, 2),
        "f1": round(100 * f1 / n, 2),
        "contains_gold": round(100 * contains / n, 2),
        "cut_short": round(100 * short / n, 2),  # inside a gold answer, holding none
        "no_answer_share": round(sum(s.text == "" for s in spans) / n, 4),
        "seconds": round(seconds, 1),
        "questions_per_s": round(n / seconds, 1),
    }
