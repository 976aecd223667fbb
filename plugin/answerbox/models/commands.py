"""``answerbox models export|pack|unpack|info``: wired into the main CLI by :func:`add_models_subcommand`.

Serving needs none of export, pack and unpack: they live in ``onnx_models/`` (with torch and
onnx, the ``[export]`` extra), which the wheel does not carry, and are imported only when called.
``onnx_models`` is imported as any package is: from a checkout's root, run as
``python -m answerbox.ops.cli models ...`` (which puts that folder on ``sys.path``) or with the
checkout on ``PYTHONPATH``; where it is not importable, the command says so in one line.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["add_models_subcommand"]


def add_models_subcommand(subparsers: Any) -> None:
    """Add ``models`` with ``export``, ``pack``, ``unpack`` and ``info`` to an ``argparse`` subparsers object."""
    models = subparsers.add_parser("models", help="export and inspect the ONNX reader/evaluator")
    commands = models.add_subparsers(dest="models_command", required=True)

    export = commands.add_parser("export", help="turn a local HF checkpoint into ONNX variants + manifest.json")
    export.add_argument("checkpoint", type=Path, help="local checkpoint directory (config.json, weights, tokenizer)")
    export.add_argument("out", type=Path, help="output directory, e.g. onnx_models/default")
    export.add_argument(
        "--task",
        choices=["reader-evaluator", "question-answering", "text-classification"],
        help="default: what the checkpoint declares, else question-answering",
    )
    export.add_argument("--variants", default="fp32,int8", help="comma-separated subset of fp32,fp16,int8")
    export.add_argument("--max-length", type=int, help="tokens per window (default 192; 384 for optimum tasks)")
    export.add_argument("--stride", type=int, help="tokens shared by consecutive windows")
    export.set_defaults(run=_export)

    pack = commands.add_parser("pack", help="write model.fp32.packed.onnx: the fp32 graph as the repository keeps it")
    pack.add_argument("dir", type=Path, help="a model directory holding model.fp32.onnx and model.int8.onnx")
    pack.set_defaults(run=_pack)

    unpack = commands.add_parser(
        "unpack", help="rebuild model.fp32.onnx from model.fp32.packed.onnx and the int8 graph"
    )
    unpack.add_argument("dir", type=Path, help="a model directory, e.g. onnx_models/default")
    unpack.set_defaults(run=_unpack)

    info = commands.add_parser("info", help="load a model directory and show its manifest and provider")
    info.add_argument("--config", type=Path, help="YAML settings file (default: $ANSWERBOX_CONFIG)")
    info.set_defaults(run=_info)


@contextmanager
def _building(command: str) -> Iterator[None]:
    """Imports of ``onnx_models`` (the building side) inside: one that fails exits with one line."""
    try:
        yield
    except ModuleNotFoundError as exc:
        raise SystemExit(
            f"answerbox models {command}: {exc.name} is missing: run it from the root of an answerbox checkout "
            f"(where onnx_models/ lives) as `python -m answerbox.ops.cli models {command} ...`, "
            "with the [export] extra installed"
        ) from exc


def _export(args: argparse.Namespace) -> int:
    with _building("export"):
        from onnx_models.export.variants import export_model
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    manifest = export_model(
        args.checkpoint, args.out, args.task, variants, max_length=args.max_length, stride=args.stride
    )
    print(manifest)
    return 0


def _pack(args: argparse.Namespace) -> int:
    with _building("pack"):
        from onnx_models.export.packing import pack_fp32
    print(pack_fp32(args.dir))
    return 0


def _unpack(args: argparse.Namespace) -> int:
    with _building("unpack"):
        from onnx_models.export.packing import unpack_fp32
    print(unpack_fp32(args.dir))
    return 0


def _info(args: argparse.Namespace) -> int:
    import dataclasses

    from answerbox.core.config import Settings
    from answerbox.models import load_models

    settings = Settings.load(args.config).models
    models = load_models(settings)
    try:
        report = {"dir": str(settings.dir), "variant": settings.variant, "provider": models.provider}
        print(json.dumps({**report, "manifest": dataclasses.asdict(models.manifest)}, indent=2))
    finally:
        models.close()
    return 0
