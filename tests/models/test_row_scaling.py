from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from answerbox.models.session import OnnxSession
from onnx import version_converter

from onnx_models.export.row_scaling import down_projections, feed_forward, projections, scale_rows
from onnx_models.export.variants import to_int8
from onnx_models.train.tiny import tiny_config


def _run(model_path: Path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return OnnxSession(model_path, providers=["CPUExecutionProvider"]).run(inputs)


def _assert_close(got: dict[str, np.ndarray], want: dict[str, np.ndarray], atol: float) -> None:
    assert got.keys() == want.keys()
    for name in want:
        np.testing.assert_allclose(got[name], want[name], atol=atol, rtol=0)


# (which MatMuls, how many per layer, how many scalings per layer; +1 each: the span head,
# whose input is its own tensor). Query, key and value read one tensor: it is scaled once,
# so ONNX Runtime still quantizes it once.
SELECTIONS = {"down_projections": (down_projections, 1, 1, 0), "projections": (projections, 6, 4, 1)}


@pytest.mark.parametrize("selection", SELECTIONS)
@pytest.mark.parametrize("opset", [17, 18])  # ReduceMax takes its axes as an input from opset 18
def test_row_scaling_leaves_fp32_outputs_unchanged(
    tiny_export: Path, tiny_inputs: dict[str, np.ndarray], tmp_path: Path, opset: int, selection: str
) -> None:
    select, per_layer, scalings_per_layer, heads = SELECTIONS[selection]
    layers = tiny_config().num_hidden_layers
    model = onnx.load(str(tiny_export / "model.fp32.onnx"))
    if opset != 17:
        model = version_converter.convert_version(model, opset)
    original = tmp_path / "original.onnx"
    onnx.save(model, str(original))
    names = select(model)
    assert len(names) == per_layer * layers + heads
    scale_rows(model, names)
    assert sum(n.op_type == "ReduceMax" for n in model.graph.node) == scalings_per_layer * layers + heads
    scaled = tmp_path / "scaled.onnx"
    onnx.save(model, str(scaled))
    _assert_close(_run(scaled, tiny_inputs), _run(original, tiny_inputs), atol=1e-4)


def test_int8_per_token_quantizes_the_scaled_down_projections(
    tiny_export: Path, tiny_inputs: dict[str, np.ndarray], tmp_path: Path
) -> None:
    fp32 = tiny_export / "model.fp32.onnx"
    names = down_projections(onnx.load(str(fp32)))
    target = to_int8(fp32, tmp_path / "model.int8.onnx", per_token=names)
    nodes = onnx.load(str(target)).graph.node
    default = onnx.load(str(tiny_export / "model.int8.onnx")).graph.node
    # Still every projection in int8, behind one scale per token where asked.
    assert sum(n.op_type == "MatMulInteger" for n in nodes) == sum(n.op_type == "MatMulInteger" for n in default)
    assert sum(n.name.endswith("/ScaleRows") for n in nodes) == len(names)
    # The tolerance of the default int8 against fp32 (tests/models/test_export.py).
    _assert_close(_run(target, tiny_inputs), _run(fp32, tiny_inputs), atol=0.1)


def test_default_int8_scales_the_feed_forward_projections_per_token(tiny_export: Path) -> None:
    """The export's recipe: up- and down-projections per token, the other projections per tensor."""
    fp32 = onnx.load(str(tiny_export / "model.fp32.onnx"))
    expected = feed_forward(fp32)
    assert len(expected) == 2 * tiny_config().num_hidden_layers
    int8 = onnx.load(str(tiny_export / "model.int8.onnx")).graph.node
    assert sorted(n.name.removesuffix("/ScaleRows") for n in int8 if n.name.endswith("/ScaleRows")) == sorted(expected)


def test_row_scaling_refuses_an_unknown_matmul(tiny_export: Path) -> None:
    model = onnx.load(str(tiny_export / "model.fp32.onnx"))
    with pytest.raises(ValueError, match="no MatMul named"):
        scale_rows(model, ["/nowhere/MatMul"])


def test_an_all_zero_row_stays_zero() -> None:
    """Its scale is clamped, not zero: no 0/0 in the row that has nothing in it."""
    import onnxruntime

    weight = np.arange(12, dtype=np.float32).reshape(3, 4) / 10
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("MatMul", ["x", "w"], ["y"], name="/down/MatMul")],
        "one_matmul",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 4])],
        [onnx.numpy_helper.from_array(weight, "w")],
    )
    # The IR version of the exports, which every supported ONNX Runtime reads.
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)], ir_version=8)
    scale_rows(model, ["/down/MatMul"])
    x = np.array([[0.0, 0.0, 0.0], [1.0, -2.0, 0.5]], np.float32)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    [y] = session.run(None, {"x": x})
    np.testing.assert_allclose(y, x @ weight, atol=1e-5, rtol=0)
