"""Reader accuracy on SQuAD v1.1 dev: each question read against its gold paragraph; EM and F1.

    PYTHONPATH=plugin python -m bench.reader_eval              # all 10,565 questions
    PYTHONPATH=plugin python -m bench.reader_eval --limit 2000 # a seeded sample
    PYTHONPATH=plugin python -m bench.reader_eval --files amazon_reviews_v1.0.json reddit_v1.0.json
                                                               # other domains, never trained on
    PYTHONPATH=plugin python -m bench.reader_eval --holdout 0.1  # the training articles a
                                                               # run with --holdout 0.1 left out

The scoring is ``onnx_models.evaluate.reading.evaluate``, through the public runtime API.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from answerbox.core.config import ModelSettings
from answerbox.models import load_models

from onnx_models.data.squad import (
    DEV_FILE,
    TRAIN_FILES,
    default_tarball,
    held_out,
    holdout_fraction,
    load_squad,
    sample_questions,
)
from onnx_models.evaluate.reading import evaluate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", type=Path, default=ModelSettings().dir)
    parser.add_argument("--variant", default="int8", choices=["int8", "fp32", "fp16"])
    parser.add_argument("--data", type=Path, default=default_tarball())
    parser.add_argument(
        "--files", nargs="+", help="squad_shifts files to read (default: SQuAD v1.1 dev; new_wiki + nyt with --holdout)"
    )
    parser.add_argument("--holdout", type=holdout_fraction, help="only the articles a run with this --holdout left out")
    parser.add_argument("--limit", type=int, default=0, help="seeded sample of questions (0 = all)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=0, help="ONNX Runtime intra-op threads (0 = all cores)")
    args = parser.parse_args()

    files = args.files or (list(TRAIN_FILES) if args.holdout is not None else [DEV_FILE])
    paragraphs = load_squad(files, args.data)
    if args.holdout is not None:  # 0 holds out nothing: held_out refuses it
        paragraphs = held_out(paragraphs, args.holdout)
    questions = sample_questions(paragraphs, args.limit, args.seed)
    settings = ModelSettings(
        dir=args.model_dir, variant=args.variant, providers=["CPUExecutionProvider"], intra_op_threads=args.threads
    )
    models = load_models(settings)
    try:
        result = evaluate(models, questions)
    finally:
        models.close()
    print(
        json.dumps(
            {"files": files, "holdout": args.holdout, "variant": args.variant, "provider": models.provider, **result}
        )
    )


if __name__ == "__main__":
    main()
