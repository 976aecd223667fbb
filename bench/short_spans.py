"""How many of the confident wrong answers are a right answer cut short: the reader's span
lies inside a gold answer, so *contains gold* (the measure of ``answer.confidence``) fails.

    PYTHONPATH=plugin:. python -m bench.short_spans

It reads the answerable rows ``onnx_models/calibrate/answer_confidence.py`` collected for the served
model (held-out training articles, through answerbox; run that first), scores each snippet
with the manifest's calibrator as serving does (the fitted model, not its cross-validated
probabilities), and counts, at and above ``min_confidence``: the answers, the wrong ones,
those whose span is a strict part of a gold answer, and the precision were those spans whole.
No search runs: the rows hold the snippets and their signals.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from answerbox.core.config import ModelSettings
from answerbox.models.confidence import AnswerCalibrator, SnippetSignals
from answerbox.models.manifest import ModelManifest

from onnx_models.calibrate.answer_confidence import rows_dir
from onnx_models.data.squad import TRAIN_FILES, cut_short, held_out, holdout_fraction, load_squad
from onnx_models.evaluate.rows import load_rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", type=Path, default=ModelSettings().dir)
    parser.add_argument("--variant", default="int8")
    parser.add_argument("--holdout", type=holdout_fraction, default=0.1)
    args = parser.parse_args()

    manifest = ModelManifest.load(args.model_dir)
    calibrator = AnswerCalibrator.from_manifest(manifest.answer_confidence)
    path = rows_dir(args.model_dir, args.variant) / "answerable.jsonl"
    rows = [r for r in load_rows(path).values() if r["signals"] is not None]
    if not rows:
        raise SystemExit(f"no rows in {path}: run python -m onnx_models.calibrate.answer_confidence first")
    answers = {q.id: q.answers for p in held_out(load_squad(TRAIN_FILES), args.holdout) for q in p.questions}
    shown = [r for r in rows if calibrator.confidence(SnippetSignals(**r["signals"])) >= calibrator.min_confidence]
    wrong = [r for r in shown if not r["right"]]
    short = [r for r in wrong if cut_short(r["text"], answers[r["id"]])]
    print(f"{path}: {len(rows)} snippets; at min_confidence {calibrator.min_confidence}: {len(shown)} answers")
    print(f"wrong {len(wrong)}, of which a strict part of a gold answer {len(short)}")
    print(
        f"precision {100 * (len(shown) - len(wrong)) / len(shown):.1f}%; "
        f"with those spans whole {100 * (len(shown) - len(wrong) + len(short)) / len(shown):.1f}%"
    )


if __name__ == "__main__":
    main()
