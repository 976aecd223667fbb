"""Choose how many of a run's last checkpoints to average, on training articles the run never saw.

    PYTHONPATH=plugin python -m onnx_models.evaluate.select_average RUN/weights/step-* --holdout 0.1 --out AVG

``onnx_models.train.reader --holdout F --keep-weights`` leaves a stable fraction F of the training
articles out of the run and keeps every checkpoint's weights. Averaging the tail of an epoch
lifts the reader, but how long a tail is a guess; here it is measured where neither the run
nor the dev bench looks. The candidates are the last k checkpoints in step order, for every
k from 1 (the last weights alone) to all of them. Each is averaged, exported to the served
variant and read on every question of the held-out articles (``onnx_models.evaluate.reading``, as
``bench/reader_eval.py`` reads dev). The best EM wins (ties: F1, then the longer tail); its
PyTorch checkpoint goes to OUT with ``selection.json``, every candidate's scores.

Pass the same ``--holdout`` as the run: a smaller one reads articles the run trained on, and
0 holds out nothing (refused).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import re
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from answerbox.core.config import ModelSettings
from answerbox.models import load_models

from onnx_models.data.squad import (
    TRAIN_FILES,
    default_tarball,
    held_out,
    holdout_fraction,
    load_squad,
    sample_questions,
)
from onnx_models.evaluate.reading import evaluate
from onnx_models.export.variants import export_model
from onnx_models.train.average import average

__all__ = ["select"]

log = logging.getLogger("answerbox.select")

_STEP = re.compile(r"step-(\d+)$")


@dataclass(frozen=True, slots=True)
class Candidate:
    checkpoints: list[str]  # the averaged tail, oldest first
    em: float
    f1: float


@dataclass(frozen=True, slots=True)
class Selection:
    chosen: Candidate
    candidates: list[Candidate]
    questions: int


def by_step(checkpoints: Sequence[Path]) -> list[Path]:
    """Kept weights (``weights/step-N``) in training order: a shell glob sorts step-241 after step-2106."""

    def step(path: Path) -> int:
        if (match := _STEP.search(path.name)) is None:
            raise SystemExit(f"{path} is not a run's kept weights (weights/step-N)")
        return int(match.group(1))

    return sorted(checkpoints, key=step)


def select(args: argparse.Namespace) -> Selection:
    tails = by_step(args.checkpoints)
    paragraphs = held_out(load_squad(TRAIN_FILES, args.data), args.holdout)
    questions = sample_questions(paragraphs, args.limit, args.seed)
    log.info("%d held-out questions from %d paragraphs", len(questions), len(paragraphs))
    rows: list[Candidate] = []
    sources: list[Path] = []  # each candidate's checkpoint, to copy the winner from
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(1, len(tails) + 1):
            members = tails[-k:]
            checkpoint = members[0] if k == 1 else average(members, Path(tmp) / f"mean-{k}")
            sources.append(checkpoint)
            exported = export_model(
                checkpoint,
                Path(tmp) / f"onnx-{k}",
                variants=(args.variant,),
                max_length=args.max_length,
                stride=args.stride,
            )
            models = load_models(
                ModelSettings(dir=exported.parent, variant=args.variant, providers=["CPUExecutionProvider"])
            )
            try:
                scores = evaluate(models, questions)
            finally:
                models.close()
            rows.append(Candidate([p.name for p in members], scores["em"], scores["f1"]))
            log.info("last %d: EM %.2f F1 %.2f", k, scores["em"], scores["f1"])
        best = max(range(len(rows)), key=lambda i: (rows[i].em, rows[i].f1, i))
        shutil.copytree(sources[best], args.out, dirs_exist_ok=True)
    selection = Selection(chosen=rows[best], candidates=rows, questions=len(questions))
    record = {"holdout": args.holdout, "variant": args.variant, "chosen_by": "EM, then F1, then the longer tail"}
    (args.out / "selection.json").write_text(json.dumps({**record, **dataclasses.asdict(selection)}, indent=2))
    return selection


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", type=Path, nargs="+", help="a run's kept weights: RUN/weights/step-N")
    parser.add_argument("--out", type=Path, required=True, help="checkpoint directory for the chosen average")
    parser.add_argument("--holdout", type=holdout_fraction, required=True, help="the run's --holdout")
    parser.add_argument("--variant", default="int8", help="choose for the variant that is served")
    parser.add_argument("--max-length", type=int, help="window length, as it will be exported (default: export's)")
    parser.add_argument("--stride", type=int, help="window overlap, as it will be exported (default: export's)")
    parser.add_argument("--data", type=Path, default=default_tarball())
    parser.add_argument("--limit", type=int, default=0, help="seeded sample of the held-out questions (0 = all)")
    parser.add_argument("--seed", type=int, default=1)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    selection = select(parse_args(argv))
    print(f"{selection.questions} held-out questions")
    for row in selection.candidates:
        print(f"last {len(row.checkpoints):2d}  EM {row.em:6.2f}  F1 {row.f1:6.2f}")
    print(f"chosen: {', '.join(selection.chosen.checkpoints)}")
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    raise SystemExit(main(sys.argv[1:]))
