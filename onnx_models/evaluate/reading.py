"""The reader's EM, F1, contains-gold, spans cut short and spans across a sentence end on
SQuAD-format questions, each read against its gold paragraph.

Shared by ``bench/reader_eval.py`` (dev questions) and ``onnx_models/evaluate/select_average.py`` (held-out
training articles), so checkpoints are chosen on exactly what the bench measures. Goes
through the public runtime API (``load_models`` → ``reader.read``), micro-batcher included.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from answerbox.models import Models, ReaderSpan
from answerbox.processors.text.sentences import sentence_spans

from onnx_models.data.squad import Paragraph, Question, contains_gold, cut_short, exact_match, f1_score

__all__ = ["evaluate", "measure"]


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
    n = len(questions)
    return {
        **measure([(s.text, q.answers) for s, (_, q) in zip(spans, questions, strict=True)]),
        "seconds": round(seconds, 1),
        "questions_per_s": round(n / seconds, 1),
    }


def measure(said: Sequence[tuple[str, Sequence[str]]]) -> dict[str, float]:
    """What the reader said against the gold answers of each question."""
    n = len(said)

    def percent(scored: Callable[[str, Sequence[str]], float]) -> float:
        return round(100 * sum(scored(text, answers) for text, answers in said) / n, 2)

    return {
        "questions": n,
        "em": percent(exact_match),
        "f1": percent(f1_score),
        "contains_gold": percent(contains_gold),
        "cut_short": percent(cut_short),  # inside a gold answer, holding none
        "no_answer_share": round(sum(text == "" for text, _ in said) / n, 4),
        "words": round(sum(len(text.split()) for text, _ in said) / n, 2),
        # The reader does not see sentences: a wide span can run across a sentence end.
        "across_sentences": percent(lambda text, _: len(sentence_spans(text)) > 1),
    }
