"""The fp32 graph stored at half its size, beside the int8 graph that is served.

A model directory holds ``model.int8.onnx`` and ``model.fp32.onnx``; together they are
113 MB, and a working tree that large cannot travel to a lent GPU (64 MiB). So the
repository keeps the fp32 graph packed: ``model.fp32.packed.onnx`` is the same graph with
every float weight stored as float16, except the lookup tables (word, position and
token-type embeddings), which are left out because the int8 graph already holds them, as
uint8 with one scale per table. :func:`unpack_fp32` rebuilds ``model.fp32.onnx`` from the
two: float16 weights widened back, tables dequantized as the int8 graph's DequantizeLinear
does. The int8 graph itself is not touched, so what is served stays bit for bit the same.

The rebuilt fp32 graph is therefore not the trained one: its weights carry float16
rounding (relative 2^-11) and its tables the int8 tables' rounding. That is the precision
the fp32 variant and ``onnx_models.train.recover`` start from (``onnx_models/README.md``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from answerbox.models.manifest import PACKED_FP32, ModelManifest
from onnx import numpy_helper

__all__ = ["pack_fp32", "unpack_fp32"]

_QUANTIZED, _SCALE, _ZERO_POINT = "_quantized", "_scale", "_zero_point"


def pack_fp32(directory: Path) -> Path:
    """Write ``directory/model.fp32.packed.onnx`` from the fp32 and int8 graphs there."""
    fp32, int8 = _variant_paths(directory)
    model = onnx.load(str(fp32))
    tables = _lookup_tables(onnx.load(str(int8)))
    kept = []
    for tensor in model.graph.initializer:
        if tensor.name in tables:
            continue
        if tensor.data_type == onnx.TensorProto.FLOAT:
            tensor = numpy_helper.from_array(numpy_helper.to_array(tensor).astype(np.float16), tensor.name)
        kept.append(tensor)
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    target = directory / PACKED_FP32
    onnx.save(model, str(target))
    return target


def unpack_fp32(directory: Path) -> Path:
    """Rebuild ``directory/model.fp32.onnx`` from the packed fp32 graph and the int8 graph."""
    fp32, int8 = _variant_paths(directory)
    model = onnx.load(str(directory / PACKED_FP32))
    tables = _lookup_tables(onnx.load(str(int8)))
    widened = [
        numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name)
        if t.data_type == onnx.TensorProto.FLOAT16
        else t
        for t in model.graph.initializer
    ]
    del model.graph.initializer[:]
    model.graph.initializer.extend(widened)
    present = {t.name for t in widened}
    # Only the tables the graph reads: the int8 graph may hold others.
    needed = {name for node in model.graph.node for name in node.input} - present
    model.graph.initializer.extend(
        numpy_helper.from_array(tables[name], name) for name in sorted(needed & tables.keys())
    )
    if missing := sorted(needed - tables.keys() - _graph_values(model)):
        raise ValueError(f"{directory / PACKED_FP32}: no weights for {missing} in it or in {int8.name}")
    onnx.save(model, str(fp32))
    return fp32


def _variant_paths(directory: Path) -> tuple[Path, Path]:
    """The fp32 and int8 graphs the manifest names (the fp32 one may not exist yet)."""
    variants = ModelManifest.load(directory).variants
    return directory / variants["fp32"], directory / variants["int8"]


def _lookup_tables(int8: onnx.ModelProto) -> dict[str, np.ndarray]:
    """The tables the int8 graph quantized for a Gather, dequantized: name → fp32 array."""
    stored = {t.name: t for t in int8.graph.initializer}
    gathered = {node.input[0] for node in int8.graph.node if node.op_type == "Gather"}
    tables = {}
    for name in gathered:
        if not name.endswith(_QUANTIZED):
            continue
        base = name.removesuffix(_QUANTIZED)
        values = numpy_helper.to_array(stored[name]).astype(np.int32)
        zero_point = numpy_helper.to_array(stored[base + _ZERO_POINT]).astype(np.int32)
        scale = numpy_helper.to_array(stored[base + _SCALE]).astype(np.float32)
        tables[base] = ((values - zero_point) * scale).astype(np.float32)
    return tables


def _graph_values(model: onnx.ModelProto) -> set[str]:
    """Names the graph defines itself: its inputs and every node's outputs."""
    return {i.name for i in model.graph.input} | {o for node in model.graph.node for o in node.output} | {""}
