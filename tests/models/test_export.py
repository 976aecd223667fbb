from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from answerbox.core.errors import ModelError
from answerbox.models.manifest import ModelManifest
from answerbox.models.session import OnnxSession

from onnx_models.export.variants import export_model
from onnx_models.train.modeling import ReaderEvaluatorModel
from onnx_models.train.tiny import tiny_config


def test_export_writes_variants_tokenizer_and_manifest(tiny_export: Path) -> None:
    manifest = ModelManifest.load(tiny_export)
    assert manifest.task == "reader-evaluator"
    assert manifest.variants == {"fp32": "model.fp32.onnx", "fp16": "model.fp16.onnx", "int8": "model.int8.onnx"}
    assert manifest.output_names == ("start_logits", "end_logits", "relevance_logits")
    assert (manifest.max_length, manifest.stride) == (48, 12)
    assert (tiny_export / "tokenizer.json").is_file()
    for name in manifest.variants.values():
        assert (tiny_export / name).stat().st_size > 0
    json.loads((tiny_export / "manifest.json").read_text())


def _float_linear_nodes(model_path: Path) -> tuple[list[str], int]:
    """The MatMul/Gemm nodes left in float, and how many were quantized."""
    import onnx

    nodes = onnx.load(str(model_path)).graph.node
    weighted = [n.name for n in nodes if n.op_type in ("MatMul", "Gemm") and "/attention/self/MatMul" not in n.name]
    return sorted(weighted), sum(n.op_type == "MatMulInteger" for n in nodes)


def test_int8_keeps_the_output_heads_in_fp32(tiny_export: Path) -> None:
    """The heads are a sliver of the compute; int8 rounding would land on the logits themselves."""
    kept, quantized = _float_linear_nodes(tiny_export / "model.int8.onnx")
    assert kept == ["/qa_outputs/MatMul", "/relevance/Gemm_MatMul"]  # ONNX Runtime splits a Gemm into MatMul + Add
    assert quantized >= 6 * tiny_config().num_hidden_layers  # every encoder projection is int8


def test_export_rejects_unknown_variant(tiny_checkpoint: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="int4"):
        export_model(tiny_checkpoint, tmp_path, variants=("int4",))


# int8: 7-bit weights keep the error at 0.025 on AVX-512 and AVX2 alike (measured, the AVX2
# path under `qemu-x86_64 -cpu Haswell`); 8-bit ones saturated on AVX2 and reached 0.29.
@pytest.mark.parametrize(("variant", "tolerance"), [("fp32", 1e-4), ("fp16", 2e-2), ("int8", 0.1)])
def test_onnx_agrees_with_pytorch(
    tiny_checkpoint: Path, tiny_export: Path, tiny_inputs: dict[str, np.ndarray], variant: str, tolerance: float
) -> None:
    manifest = ModelManifest.load(tiny_export)
    mask = tiny_inputs["attention_mask"]
    with torch.no_grad():
        expected = ReaderEvaluatorModel.load(tiny_checkpoint)(*(torch.from_numpy(a) for a in tiny_inputs.values()))
    session = OnnxSession(manifest.model_path(tiny_export, variant), providers=["CPUExecutionProvider"])
    got = session.run(tiny_inputs)
    real = mask.astype(bool)
    for name, want in zip(manifest.output_names, expected, strict=True):
        want_np = want.numpy()
        if want_np.ndim == 2:
            np.testing.assert_allclose(got[name][real], want_np[real], atol=tolerance, rtol=0)
        else:
            np.testing.assert_allclose(got[name], want_np, atol=tolerance, rtol=0)


def test_standard_qa_checkpoint_exports_through_optimum(tiny_checkpoint: Path, tmp_path: Path) -> None:
    from transformers import BertForQuestionAnswering

    checkpoint = tmp_path / "qa"
    BertForQuestionAnswering(tiny_config()).save_pretrained(checkpoint)  # type: ignore[no-untyped-call]
    (checkpoint / "tokenizer.json").write_bytes((tiny_checkpoint / "tokenizer.json").read_bytes())
    # No task given: a checkpoint that does not declare ours is taken as question-answering.
    export_model(checkpoint, tmp_path / "onnx", variants=("int8",), max_length=48, stride=12)
    manifest = ModelManifest.load(tmp_path / "onnx")
    assert manifest.task == "question-answering"
    assert manifest.output_names == ("start_logits", "end_logits")
    assert manifest.variants == {"int8": "model.int8.onnx"}
    assert not (tmp_path / "onnx" / "model.fp32.onnx").exists()
    kept, quantized = _float_linear_nodes(tmp_path / "onnx" / "model.int8.onnx")
    assert len(kept) == 1
    assert "qa_outputs" in kept[0]
    assert quantized > 0


def test_models_export_cli(tiny_checkpoint: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from answerbox.models.commands import add_models_subcommand

    parser = argparse.ArgumentParser()
    add_models_subcommand(parser.add_subparsers(dest="command", required=True))
    argv = ["models", "export", str(tiny_checkpoint), str(tmp_path), "--variants", "fp32", "--max-length", "48"]
    args = parser.parse_args(argv)
    assert args.run(args) == 0
    assert ModelManifest.load(tmp_path).variants == {"fp32": "model.fp32.onnx"}
    assert str(tmp_path / "manifest.json") in capsys.readouterr().out
