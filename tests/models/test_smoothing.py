from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from answerbox.models.session import OnnxSession
from onnx import numpy_helper

from onnx_models.export.smoothing import channel_maxima, layer_norm_inputs, smooth_channels
from onnx_models.export.variants import to_int8
from onnx_models.train.tiny import tiny_config

_OUTLIER = 7  # the channel made an outlier below


def _run(model_path: Path, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return OnnxSession(model_path, providers=["CPUExecutionProvider"]).run(inputs)


def _max_error(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> float:
    return max(float(np.abs(got[name] - want[name]).max()) for name in want)


def _with_outlier_channel(tiny_export: Path, tmp_path: Path) -> tuple[Path, str]:
    """The tiny fp32 graph with one channel of every feed-forward LayerNorm scaled up 40x, as
    the trained encoder's are; returns it and its first up-projection."""
    model = onnx.load(str(tiny_export / "model.fp32.onnx"))
    producer = {out: node for node in model.graph.node for out in node.output}
    weights = {t.name: t for t in model.graph.initializer}
    up = [n for n in model.graph.node if n.name.endswith("/intermediate/dense/MatMul")]
    for matmul in up:
        norm = producer[matmul.input[0]]
        # The exporter shares equal initializers (a fresh model's LayerNorm scales are all ones)
        # through Identity nodes: this LayerNorm gets a scale of its own.
        gamma = norm.input[1]
        while gamma not in weights:
            gamma = producer[gamma].input[0]
        values = numpy_helper.to_array(weights[gamma]).copy()
        values[_OUTLIER] *= 40
        model.graph.initializer.append(numpy_helper.from_array(values, f"{norm.name}/outlier_scale"))
        norm.input[1] = f"{norm.name}/outlier_scale"
    path = tmp_path / "outlier.fp32.onnx"
    onnx.save(model, str(path))
    return path, up[0].name


def test_smoothing_leaves_fp32_outputs_unchanged(
    tiny_export: Path, tiny_inputs: dict[str, np.ndarray], tmp_path: Path
) -> None:
    model = onnx.load(str(tiny_export / "model.fp32.onnx"))
    names = layer_norm_inputs(model)
    # Query, key, value and the up-projection per layer, and the span head on the last LayerNorm.
    assert len(names) == 4 * tiny_config().num_hidden_layers + 1
    smooth_channels(model, names)
    # Query, key and value read one tensor: it is smoothed once.
    assert sum(n.name.endswith("/Smooth") for n in model.graph.node) == 2 * tiny_config().num_hidden_layers + 1
    smoothed = tmp_path / "smoothed.onnx"
    onnx.save(model, str(smoothed))
    assert _max_error(_run(smoothed, tiny_inputs), _run(tiny_export / "model.fp32.onnx", tiny_inputs)) < 1e-4


def test_smoothing_moves_an_outlier_channel_into_the_weights(tiny_export: Path, tmp_path: Path) -> None:
    fp32, up = _with_outlier_channel(tiny_export, tmp_path)
    model = onnx.load(str(fp32))
    x = next(n.input[0] for n in model.graph.node if n.name == up)
    before = channel_maxima(model, [x])[x]
    assert before[_OUTLIER] > 10 * np.median(before)
    smooth_channels(model, [up])
    after = channel_maxima(model, [f"{up}/smoothed"])[f"{up}/smoothed"]
    # s_j = sqrt(max|x_j| / max|w_j|): the quantized input's range shrinks toward its median.
    assert after.max() / np.median(after) < before.max() / np.median(before) / 2


def test_int8_with_smoothing_quantizes_every_projection(
    tiny_export: Path, tiny_inputs: dict[str, np.ndarray], tmp_path: Path
) -> None:
    fp32 = tiny_export / "model.fp32.onnx"
    smoothed = to_int8(fp32, tmp_path / "smoothed.int8.onnx", smooth=layer_norm_inputs(onnx.load(str(fp32))))
    nodes = onnx.load(str(smoothed)).graph.node
    default = onnx.load(str(tiny_export / "model.int8.onnx")).graph.node
    # Every projection stays int8 (the heads, kept fp32, are not smoothed); only their inputs change.
    assert sum(n.op_type == "MatMulInteger" for n in nodes) == sum(n.op_type == "MatMulInteger" for n in default)
    assert sum(n.name.endswith("/Smooth") for n in nodes) == 2 * tiny_config().num_hidden_layers
    # The tolerance of the default int8 against fp32 (tests/models/test_export.py).
    assert _max_error(_run(smoothed, tiny_inputs), _run(fp32, tiny_inputs)) < 0.1


def test_smoothing_refuses_what_it_cannot_fold(tiny_export: Path) -> None:
    model = onnx.load(str(tiny_export / "model.fp32.onnx"))
    with pytest.raises(ValueError, match="no MatMul named"):
        smooth_channels(model, ["/nowhere/MatMul"])
    # Attention's score MatMul multiplies two activations: there is no weight to fold s into.
    scores = next(n.name for n in model.graph.node if n.op_type == "MatMul" and n.name.endswith("/self/MatMul"))
    with pytest.raises(ValueError, match="no constant weight"):
        smooth_channels(model, [scores])
