"""A student reader-evaluator: the shipped one with only some of its encoder layers, to train on.

    PYTHONPATH=plugin:. python -m onnx_models.train.student TEACHER OUT --keep-layers 0 1 2
    PYTHONPATH=plugin:. python -m onnx_models.train.reader --init OUT ...   # the same recipe

An answer's time is the encoder's forward pass (onnx_models/LOG.md, *Where an extractive
answer's time goes*), so half the layers is about half the time. The student starts from the
teacher's kept layers, embeddings and heads, not from scratch: Sajjad et al. (2023) find that
dropping the top layers of a fine-tuned BERT and fine-tuning again keeps most of its accuracy.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from torch import nn

from onnx_models.train.modeling import ReaderEvaluatorModel

__all__ = ["student"]

log = logging.getLogger(__name__)


def student(teacher: Path, out: Path, keep: Sequence[int]) -> Path:
    """Write ``out``: ``teacher`` with only the encoder layers ``keep`` (in that order)."""
    model = ReaderEvaluatorModel.load(teacher)
    layers = model.encoder.encoder.layer
    if not keep or len(set(keep)) != len(keep) or not all(0 <= i < len(layers) for i in keep):
        raise SystemExit(f"--keep-layers must name distinct layers of 0..{len(layers) - 1}, not {list(keep)}")
    model.encoder.encoder.layer = nn.ModuleList(layers[i] for i in keep)
    model.config.num_hidden_layers = len(keep)
    model.save(out, teacher)
    log.info("kept layers %s of %d into %s", list(keep), len(layers), out)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("teacher", type=Path, help="a reader-evaluator checkpoint")
    parser.add_argument("out", type=Path)
    parser.add_argument("--keep-layers", type=int, nargs="+", required=True)
    args = parser.parse_args(argv)
    print(student(args.teacher, args.out, args.keep_layers))
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    raise SystemExit(main(sys.argv[1:]))
