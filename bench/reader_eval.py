"""Reader accuracy on SQuAD v1.1 dev: each question read against its gold paragraph; EM and F1.

    PYTHONPATH=plugin python -m bench.reader_eval              # all 10,565 questions
    PYTHONPATH=plugin python -m bench.reader_eval --limit 2000 # a seeded sample

Goes through the public runtime API (``load_models`` → ``reader.read``), micro-batcher included.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

from answerbox.config import ModelSettings
from answerbox.models import Models, ReaderSpan, load_models

from onnx_models.squad import (
    DEV_FILE,
    Paragraph,
    Question,
    default_tarball,
    exact_match,
    f1_score,
    load_squad,
    sample_questions,
)


async def read_all(models: Models, questions: list[tuple[Paragraph, Question]], concurrency: int) -> list[ReaderSpan]:
    gate = asyncio.Semaphore(concurrency)

    async def one(paragraph: Paragraph, question: Question) -> ReaderSpan:
        async with gate:
            [span] = await models.reader.read(question.text, [paragraph.context])
            return span

    return await asyncio.gather(*(one(p, q) for p, q in questions))


def evaluate(models: Models, questions: list[tuple[Paragraph, Question]], concurrency: int = 16) -> dict[str, float]:
    started = time.perf_counter()
    spans = asyncio.run(read_all(models, questions, concurrency))
    seconds = time.perf_counter() - started
    em = sum(exact_match(s.text, q.answers) for s, (_, q) in zip(spans, questions, strict=True))
    f1 = sum(f1_score(s.text, q.answers) for s, (_, q) in zip(spans, questions, strict=True))
    n = len(questions)
    return {
        "questions": n,
        "em": round(100 * em / n, 2),
        "f1": round(100 * f1 / n, 2),
        "no_answer_share": round(sum(s.text == "" for s in spans) / n, 4),
        "seconds": round(seconds, 1),
        "questions_per_s": round(n / seconds, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", type=Path, default=ModelSettings().dir)
    parser.add_argument("--variant", default="int8", choices=["int8", "fp32", "fp16"])
    parser.add_argument("--data", type=Path, default=default_tarball())
    parser.add_argument("--limit", type=int, default=0, help="seeded sample of questions (0 = all 10,565)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=0, help="ONNX Runtime intra-op threads (0 = all cores)")
    args = parser.parse_args()

    questions = sample_questions(load_squad([DEV_FILE], args.data), args.limit, args.seed)
    settings = ModelSettings(
        dir=args.model_dir, variant=args.variant, providers=["CPUExecutionProvider"], intra_op_threads=args.threads
    )
    models = load_models(settings)
    try:
        result = evaluate(models, questions)
    finally:
        models.close()
    print(json.dumps({"variant": args.variant, "provider": models.provider, **result}))


if __name__ == "__main__":
    main()
