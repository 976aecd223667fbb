from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from answerbox.models.export import output_heads
from answerbox.models.manifest import ModelManifest
from answerbox.models.session import OnnxSession
from answerbox.models.windows import WindowTokenizer, load_tokenizer, pad_windows

from onnx_models.smooth import Observed, choose_scale, int8_error, linear_inputs, smooth, smoothed_int8

QUESTION = "who wrote the letter?"
PASSAGES = ["the letter was written by ada lovelace in 1843.", "a short one", "numbers 1 2 3 " * 12]


def _feeds(directory: Path) -> dict[str, np.ndarray]:
    manifest = ModelManifest.load(directory)
    tokenizer = WindowTokenizer(load_tokenizer(directory / manifest.tokenizer), max_length=manifest.max_length, stride=manifest.stride)
    ids, mask, types = pad_windows(tokenizer.windows(QUESTION, PASSAGES))
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def _run(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return OnnxSession(path, providers=["CPUExecutionProvider"]).run(feeds)


def test_smoothing_leaves_the_fp32_function_unchanged(tiny_export: Path, tmp_path: Path) -> None:
    fp32 = tiny_export / "model.fp32.onnx"
    model = onnx.load(str(fp32))
    groups = linear_inputs(model.graph, output_heads(fp32))
    assert any(len(readers) == 3 for readers in groups.values())  # query, key and value share their input
    rng = np.random.default_rng(0)
    scales = {tensor: rng.uniform(0.2, 5.0, size=_width(model, readers[0])).astype(np.float32) for tensor, readers in groups.items()}
    onnx.save(smooth(model, scales), str(tmp_path / "smoothed.onnx"))
    feeds = _feeds(tiny_export)
    before, after = _run(fp32, feeds), _run(tmp_path / "smoothed.onnx", feeds)
    for name, value in before.items():
        np.testing.assert_allclose(after[name], value, atol=1e-4)
    smoothed = onnx.load(str(tmp_path / "smoothed.onnx")).graph.node
    assert sum(n.op_type == "Mul" for n in smoothed) == sum(n.op_type == "Mul" for n in model.graph.node) + len(groups)


def _width(model: onnx.ModelProto, node: onnx.NodeProto) -> int:
    [weight] = [init for init in model.graph.initializer if init.name == node.input[1]]
    return int(weight.dims[0])


def test_an_outlier_channel_is_smoothed_a_flat_input_is_not() -> None:
    rng = np.random.default_rng(1)
    weights = [rng.normal(0, 0.05, size=(64, 32)).astype(np.float32)]
    flat = rng.normal(0, 1, size=(2048, 64)).astype(np.float32)
    outlier = flat.copy()
    outlier[:, 7] *= 40  # one channel 40x the rest, as after the FFN's LayerNorm
    for x, smoothed in ((outlier, True), (flat, False)):
        alpha, s = choose_scale(Observed(np.abs(x).max(axis=0), x), weights, [0.25, 0.5, 0.75])
        assert (alpha is not None) is smoothed
        assert int8_error(x, weights, s) <= int8_error(x, weights, np.ones(64, dtype=np.float32))
    alpha, s = choose_scale(Observed(np.abs(outlier).max(axis=0), outlier), weights, [0.5])
    assert int8_error(outlier, weights, s) < 0.5 * int8_error(outlier, weights, np.ones(64, dtype=np.float32))


def test_smoothed_int8_keeps_the_heads_and_answers_like_fp32(tiny_export: Path, tmp_path: Path) -> None:
    fp32 = tiny_export / "model.fp32.onnx"
    feeds = _feeds(tiny_export)
    chosen = smoothed_int8(fp32, tmp_path / "model.int8.onnx", [feeds], [0.5])
    assert set(chosen) == set(linear_inputs(onnx.load(str(fp32)).graph, output_heads(fp32)))
    nodes = onnx.load(str(tmp_path / "model.int8.onnx")).graph.node
    assert {n.name for n in nodes if n.op_type in ("MatMul", "Gemm")} >= {"/qa_outputs/MatMul", "/relevance/Gemm_MatMul"}
    exact, quantized = _run(fp32, feeds), _run(tmp_path / "model.int8.onnx", feeds)
    for name, value in exact.items():
        assert np.abs(quantized[name] - value).max() < 0.1  # the export's int8 tolerance
