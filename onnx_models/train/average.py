"""Average the weights of checkpoints fine-tuned from one another (a model soup): reader-evaluator
checkpoints, or the claim verifier's.

    PYTHONPATH=plugin python -m onnx_models.train.average CHECKPOINT_A CHECKPOINT_B OUT

Two runs that continue from the same weights lie in one basin; the mean of their weights
often scores better than either, at no training cost. Every checkpoint must have the
parameters of the first, whose config and tokenizer go with the result.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from onnx_models.train.modeling import TOKENIZER_FILES, WEIGHTS_FILE, copy_files

__all__ = ["average"]

log = logging.getLogger(__name__)


def average(checkpoints: Sequence[Path], out: Path) -> Path:
    if len(checkpoints) < 2:
        raise SystemExit("average needs at least two checkpoints")
    states = [load_file(str(path / WEIGHTS_FILE)) for path in checkpoints]
    shapes = {name: value.shape for name, value in states[0].items()}
    for path, state in zip(checkpoints[1:], states[1:], strict=True):
        if {name: value.shape for name, value in state.items()} != shapes:
            raise SystemExit(f"{path} does not have the parameters of {checkpoints[0]}")
    # Integer buffers (position ids) are equal in every checkpoint; only floats are averaged.
    mean = {
        name: torch.stack([s[name] for s in states]).mean(dim=0) if value.is_floating_point() else value
        for name, value in states[0].items()
    }
    out.mkdir(parents=True, exist_ok=True)
    save_file(mean, str(out / WEIGHTS_FILE))
    copy_files(checkpoints[0], out, ("config.json", *TOKENIZER_FILES))
    log.info("averaged %d checkpoints into %s", len(checkpoints), out)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", type=Path, nargs="+", help="checkpoint directories")
    parser.add_argument("out", type=Path, help="checkpoint directory to write")
    args = parser.parse_args(argv)
    average(args.checkpoints, args.out)
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    raise SystemExit(main(sys.argv[1:]))
