"""``answerbox models export`` for a checkout without the console script installed.

    PYTHONPATH=plugin python -m onnx_models.export CHECKPOINT onnx_models/default --variants fp32,int8

The work is done by :func:`answerbox.models.export.export_model`.
"""

from __future__ import annotations

import argparse
import logging
import sys

from answerbox.models.commands import add_models_subcommand


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m onnx_models.export")
    add_models_subcommand(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["models", "export", *argv])
    return int(args.run(args))


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    raise SystemExit(main(sys.argv[1:]))
