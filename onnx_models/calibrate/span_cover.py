"""Choose how far the reader's shown span reaches past its best one; write it to manifest.json as
``span_cover_margin``.

    PYTHONPATH=plugin:. python -m onnx_models.calibrate.span_cover --holdout 0.1 --limit 2270

The reader's best span is one guess at where an answer starts and ends, and annotators draw
that boundary differently: a third of the held-out answers it gets wrong are a right answer
cut short. With a margin m, ``answerbox.models.reader.best_span`` shows the span covering
every span that overlaps the best one within m of its start+end logit, so the box holds the
whole answer more often (*right*, as answer.confidence and the benches define it) and says a
few more words.

Each question of a seeded sample of the held-out training articles (squad_shifts new_wiki +
nyt, the ``--holdout`` articles training left out; SQuAD dev and the other-domain files are
never read) is read against its gold paragraph once, through the public reader, at every margin
of the grid. The widest margin whose F1 stays within ``--max-f1-loss`` points of the best span
alone wins: F1 counts the added words against the answer, so this bounds how much longer the
box's answer gets. ``--dry-run`` prints the table without writing the manifest.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from answerbox.core.config import ModelSettings
from answerbox.models import ModelManifest, Models, Reader, load_models

from onnx_models.data.squad import (
    TRAIN_FILES,
    Paragraph,
    Question,
    default_tarball,
    held_out,
    holdout_fraction,
    load_squad,
    sample_questions,
)
from onnx_models.evaluate.reading import measure

GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0)


async def read_at_margins(
    models: Models, questions: Sequence[tuple[Paragraph, Question]], margins: Sequence[float], concurrency: int = 16
) -> dict[float, list[str]]:
    """What the reader shows at each margin, per question. One question's margins are read one
    after another, so the encoder's cache serves all but the first."""
    manifest = models.manifest
    readers = [Reader(models.encoder, max_answer_tokens=manifest.max_answer_tokens, cover_margin=m) for m in margins]
    gate = asyncio.Semaphore(concurrency)

    async def one(paragraph: Paragraph, question: Question) -> list[str]:
        async with gate:
            return [(await r.read(question.text, [paragraph.context]))[0].text for r in readers]

    said = await asyncio.gather(*(one(p, q) for p, q in questions))
    return {m: [texts[i] for texts in said] for i, m in enumerate(margins)}


def choose(table: dict[float, dict[str, float]], max_f1_loss: float) -> float:
    """The widest margin whose F1 is within ``max_f1_loss`` points of the best span alone's."""
    floor = table[0.0]["f1"] - max_f1_loss
    return max(m for m, row in table.items() if row["f1"] >= floor)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", type=Path, default=ModelSettings().dir)
    parser.add_argument("--variant", default="int8", help="choose for the variant that is served")
    parser.add_argument("--data", type=Path, default=default_tarball())
    parser.add_argument("--holdout", type=holdout_fraction, required=True, help="the articles training left out")
    parser.add_argument("--limit", type=int, default=2270, help="seeded sample of questions (0 = all)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-f1-loss", type=float, default=1.5, help="points of F1 the wider span may cost")
    parser.add_argument("--dry-run", action="store_true", help="print the table; leave the manifest alone")
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    questions = sample_questions(held_out(load_squad(TRAIN_FILES, args.data), args.holdout), args.limit, args.seed)
    settings = ModelSettings(dir=args.model_dir, variant=args.variant, providers=["CPUExecutionProvider"])
    models = load_models(settings)
    try:
        shown = asyncio.run(read_at_margins(models, questions, GRID))
    finally:
        models.close()
    table = {
        m: measure([(t, q.answers) for t, (_, q) in zip(texts, questions, strict=True)]) for m, texts in shown.items()
    }
    chosen = choose(table, args.max_f1_loss)
    for m, row in table.items():
        print(json.dumps({"margin": m, **row, **({"chosen": True} if m == chosen else {})}))
    if args.dry_run:
        return
    record: dict[str, Any] = {
        "data": [f"squad_shifts/{name}" for name in TRAIN_FILES],
        "holdout": args.holdout,
        "variant": args.variant,
        "questions": len(questions),
        "seed": args.seed,
        "chosen_by": f"the widest margin whose F1 is within {args.max_f1_loss} points of the best span's",
        "table": {str(m): row for m, row in table.items()},
    }
    manifest = ModelManifest.load(args.model_dir)
    manifest.replace(span_cover_margin=chosen, calibration={**manifest.calibration, "span_cover": record}).save(
        args.model_dir
    )
    print(f"span_cover_margin {chosen} written to {args.model_dir}")


if __name__ == "__main__":
    main()
