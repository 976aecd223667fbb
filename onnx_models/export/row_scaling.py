"""Per-token scaling of a MatMul's input, so that per-tensor dynamic int8 acts per token.

ONNX Runtime's dynamic quantization gives a whole activation tensor one uint8 scale. The
feed-forward down-projection's input (the GELU output, 1,536 wide) has a few tokens far
above the rest, and one scale for all of them rounds the other tokens coarsely. Rewriting

    Y = X·W    as    s = max|X| per row,    Y = ((X / s)·W) · s

is exact in fp32, but every row of ``X / s`` spans the same range, so the quantizer that
follows rounds each token on its own scale. ``to_int8(..., per_token=...)`` applies it
before quantizing; the rewritten MatMul keeps its name and its constant weight.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

__all__ = ["down_projections", "feed_forward", "projections", "scale_rows"]

_TINY = "row_scaling/tiny"
_LAST_AXIS = "row_scaling/last_axis"


def down_projections(model: onnx.ModelProto) -> list[str]:
    """The feed-forward down-projection MatMuls of a BERT encoder export."""
    return [
        n.name
        for n in model.graph.node
        if n.op_type == "MatMul" and n.name.endswith("/output/dense/MatMul") and "/attention/" not in n.name
    ]


def feed_forward(model: onnx.ModelProto) -> list[str]:
    """The feed-forward up- and down-projection MatMuls of a BERT encoder export: where per-token
    scaling buys back the most int8 accuracy for its cost (``onnx_models/LOG.md``)."""
    down = set(down_projections(model))
    return [n.name for n in model.graph.node if n.name in down or n.name.endswith("/intermediate/dense/MatMul")]


def projections(model: onnx.ModelProto) -> list[str]:
    """Every MatMul whose weight is a constant: the ones dynamic int8 quantizes."""
    constants = {t.name for t in model.graph.initializer}
    return [n.name for n in model.graph.node if n.op_type == "MatMul" and n.input[1] in constants]


def scale_rows(model: onnx.ModelProto, matmuls: Sequence[str]) -> None:
    """Rewrite the MatMuls named in ``matmuls`` in place (see the module docstring)."""
    wanted = set(matmuls)
    if not wanted:
        return
    if missing := wanted - {n.name for n in model.graph.node if n.op_type == "MatMul"}:
        raise ValueError(f"no MatMul named {sorted(missing)}")
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    graph = model.graph
    graph.initializer.append(numpy_helper.from_array(np.array(np.finfo(np.float32).tiny, np.float32), _TINY))
    if opset >= 18:
        graph.initializer.append(numpy_helper.from_array(np.array([-1], np.int64), _LAST_AXIS))
    rewritten: list[onnx.NodeProto] = []
    scaled: dict[str, tuple[str, str]] = {}  # input -> (scaled input, its row scale), shared by its MatMuls
    for node in graph.node:
        if node.name not in wanted:
            rewritten.append(node)
            continue
        x, name, y = node.input[0], node.name, node.output[0]
        if x not in scaled:
            rewritten += _row_scale(x, name, opset)
            scaled[x] = (f"{name}/scaled", f"{name}/scale")
        # MatMuls that read one tensor (query, key, value) share its scaling, so ONNX Runtime
        # still quantizes that tensor once.
        x_scaled, scale = scaled[x]
        node.input[0], node.output[0] = x_scaled, f"{name}/unscaled"
        rewritten.append(node)
        rewritten.append(helper.make_node("Mul", [f"{name}/unscaled", scale], [y], name=f"{name}/Unscale"))
    del graph.node[:]
    graph.node.extend(rewritten)


def _row_scale(x: str, name: str, opset: int) -> list[onnx.NodeProto]:
    """Nodes computing ``name/scale`` (max |x| per row) and ``name/scaled`` (x / scale)."""
    # ReduceMax took its axes as an attribute until opset 18, as an input since.
    reduce_max = (
        helper.make_node("ReduceMax", [f"{name}/abs", _LAST_AXIS], [f"{name}/max"], keepdims=1)
        if opset >= 18
        else helper.make_node("ReduceMax", [f"{name}/abs"], [f"{name}/max"], axes=[-1], keepdims=1)
    )
    reduce_max.name = f"{name}/RowMax"
    # An all-zero row would divide by zero: its scale is clamped to the smallest normal float.
    return [
        helper.make_node("Abs", [x], [f"{name}/abs"], name=f"{name}/Abs"),
        reduce_max,
        helper.make_node("Max", [f"{name}/max", _TINY], [f"{name}/scale"], name=f"{name}/Clamp"),
        helper.make_node("Div", [x, f"{name}/scale"], [f"{name}/scaled"], name=f"{name}/ScaleRows"),
    ]
