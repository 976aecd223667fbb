"""Per-channel smoothing of a MatMul's input, folded into its weight (SmoothQuant), before int8.

The LayerNorm outputs that feed the query/key/value and the feed-forward up-projections carry a
few channels far above the rest (on the shipped model, 27 against a median channel maximum of
2), and they are the same channels for any input: a property of the weights, not of the text.
One per-tensor activation scale set by them rounds every other channel coarsely. Rewriting

    Y = X·W    as    Y = (X / s)·(diag(s)·W),    s_j = max|X_j|^α / max_n |W_jn|^(1-α)

is exact in fp32 and moves part of those channels' range into the weights, which int8 quantizes
per output channel. It costs one Mul by a constant per smoothed tensor. The channel maxima come
from the fp32 graph run on random token ids, so no data is needed (``onnx_models/LOG.md``
compares them with dev text).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnx_models.export.row_scaling import projections

__all__ = ["channel_maxima", "layer_norm_inputs", "smooth_channels"]

ALPHA = 0.5  # SmoothQuant's balance between the activation's range and the weight's


def layer_norm_inputs(model: onnx.ModelProto) -> list[str]:
    """The MatMuls with a constant weight that read a LayerNormalization's output."""
    normalized = {n.output[0] for n in model.graph.node if n.op_type == "LayerNormalization"}
    weighted = set(projections(model))
    return [n.name for n in model.graph.node if n.name in weighted and n.input[0] in normalized]


def _probe_inputs(vocabulary_size: int) -> dict[str, np.ndarray]:
    """Random windows: the outlier channels are the same on them as on text."""
    rng = np.random.default_rng(0)
    shape = (8, 128)
    return {
        "input_ids": rng.integers(0, vocabulary_size, shape),
        "attention_mask": np.ones(shape, np.int64),
        "token_type_ids": np.repeat((np.arange(shape[1]) >= shape[1] // 4)[None], shape[0], 0).astype(np.int64),
    }


def _smoothing_scale(activation_max: np.ndarray, weight_max: np.ndarray) -> np.ndarray:
    """s per input channel; a dead channel (all zero) keeps s = 1: nothing to move either way."""
    live = (activation_max > 0) & (weight_max > 0)
    s = np.where(live, np.maximum(activation_max, 1e-12) ** ALPHA / np.maximum(weight_max, 1e-12) ** (1 - ALPHA), 1.0)
    return s.astype(np.float32)


def channel_maxima(model: onnx.ModelProto, tensors: Sequence[str]) -> dict[str, np.ndarray]:
    """max |x| per channel (last axis) of each tensor, over random token ids fed to the fp32 graph."""
    import onnxruntime as ort

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    del probe.graph.output[:]
    probe.graph.output.extend(helper.make_tensor_value_info(t, onnx.TensorProto.FLOAT, None) for t in tensors)
    session = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    feed = {k: v for k, v in _probe_inputs(_vocabulary_size(model)).items() if k in names}
    outputs = session.run(list(tensors), feed)
    return {t: np.abs(x).reshape(-1, x.shape[-1]).max(axis=0) for t, x in zip(tensors, outputs, strict=True)}


def smooth_channels(model: onnx.ModelProto, matmuls: Sequence[str]) -> None:
    """Rewrite the MatMuls named in ``matmuls`` in place (see the module docstring); MatMuls that
    read one tensor (query, key, value) share its smoothing, so it stays one tensor to quantize."""
    wanted = set(matmuls)
    if not wanted:
        return
    graph = model.graph
    nodes = [n for n in graph.node if n.name in wanted and n.op_type == "MatMul"]
    if missing := wanted - {n.name for n in nodes}:
        raise ValueError(f"no MatMul named {sorted(missing)}")
    weights = {t.name: t for t in graph.initializer}
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in nodes:
        if node.input[1] not in weights:
            raise ValueError(f"{node.name} has no constant weight to fold a smoothing into")
        readers.setdefault(node.input[0], []).append(node)
    maxima = channel_maxima(model, list(readers))
    inserted: dict[str, onnx.NodeProto] = {}
    for x, group in readers.items():
        arrays = [numpy_helper.to_array(weights[n.input[1]]) for n in group]
        s = _smoothing_scale(maxima[x], np.max([np.abs(w).max(axis=1) for w in arrays], axis=0))
        first = group[0].name
        graph.initializer.append(numpy_helper.from_array((1 / s).astype(np.float32), f"{first}/smoothing"))
        inserted[first] = helper.make_node(
            "Mul", [x, f"{first}/smoothing"], [f"{first}/smoothed"], name=f"{first}/Smooth"
        )
        for node, w in zip(group, arrays, strict=True):
            folded = f"{node.name}/smoothed_weight"
            graph.initializer.append(numpy_helper.from_array((w * s[:, None]).astype(w.dtype), folded))
            node.input[0], node.input[1] = f"{first}/smoothed", folded
    # The Mul goes right before the first MatMul that reads it, keeping the nodes in order.
    ordered: list[onnx.NodeProto] = []
    for node in graph.node:
        if node.name in inserted:
            ordered.append(inserted[node.name])
        ordered.append(node)
    del graph.node[:]
    graph.node.extend(ordered)
    _drop_unused_initializers(graph)


def _vocabulary_size(model: onnx.ModelProto) -> int:
    """Rows of the table that ``input_ids`` indexes."""
    tables = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Gather" and node.input[1] == "input_ids" and node.input[0] in tables:
            return int(tables[node.input[0]].dims[0])
    raise ValueError("no embedding table is indexed by input_ids")


def _drop_unused_initializers(graph: onnx.GraphProto) -> None:
    used = {name for node in graph.node for name in node.input}
    kept = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
