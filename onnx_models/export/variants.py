"""``answerbox models export``: a local HF checkpoint → ONNX variants + ``manifest.json``.

Our two-head reader/evaluator goes through ``torch.onnx.export``; standard
question-answering and sequence-classification checkpoints (e.g. a local copy of
deepset/roberta-base-squad2) go through optimum. Every variant derives from the fp32 graph:
fp16 by ONNX Runtime's float16 converter, int8 by dynamic quantization of the weights.
Needs the ``export`` extra (torch, transformers, optimum-onnx).
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from answerbox.core.errors import ModelError
from answerbox.models.manifest import ModelManifest

if TYPE_CHECKING:
    import onnx

__all__ = ["TASKS", "VARIANTS", "export_model", "output_heads", "to_fp16", "to_int8"]

log = logging.getLogger(__name__)

READER_EVALUATOR = "reader-evaluator"
TASKS = (READER_EVALUATOR, "question-answering", "text-classification")
VARIANTS = ("fp32", "fp16", "int8")
_OPSET = 17


def export_model(
    checkpoint_dir: Path,
    out_dir: Path,
    task: str | None = None,
    variants: Sequence[str] = ("fp32", "int8"),
    *,
    max_length: int | None = None,
    stride: int | None = None,
) -> Path:
    """Write ``model.<variant>.onnx``, ``tokenizer.json`` and ``manifest.json`` to ``out_dir``; return the manifest.

    ``task`` defaults to what the checkpoint declares (``answerbox_task`` in config.json),
    else ``question-answering``. Thresholds start at uncalibrated defaults; run
    ``onnx_models/calibrate/thresholds.py`` afterwards.
    """
    bad = sorted(set(variants) - set(VARIANTS))
    if bad or not variants:
        raise ModelError(f"unknown variants {bad or list(variants)}; choose from {list(VARIANTS)}")
    task = task or _declared_task(checkpoint_dir)
    if task not in TASKS:
        raise ModelError(f"unknown task {task!r}; choose from {list(TASKS)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    fp32 = out_dir / "model.fp32.onnx"
    with tempfile.TemporaryDirectory() as tmp:
        if task == READER_EVALUATOR:
            _export_reader_evaluator(checkpoint_dir, fp32)
        else:
            _export_with_optimum(checkpoint_dir, task, Path(tmp), fp32)
    files = {"fp32": fp32.name}
    if "fp16" in variants:
        files["fp16"] = to_fp16(fp32, out_dir / "model.fp16.onnx").name
    if "int8" in variants:
        files["int8"] = to_int8(fp32, out_dir / "model.int8.onnx").name
    if "fp32" not in variants:
        fp32.unlink()
        del files["fp32"]
    _copy_tokenizer(checkpoint_dir, out_dir / "tokenizer.json")
    inputs, outputs = _io_names(out_dir / next(iter(files.values())))
    defaults = (192, 48) if task == READER_EVALUATOR else (384, 128)
    manifest = ModelManifest(
        task=task,
        variants=files,
        input_names=inputs,
        output_names=outputs,
        max_length=max_length or defaults[0],
        stride=stride if stride is not None else defaults[1],
    )
    log.info("exported %s (%s) to %s", checkpoint_dir, ", ".join(files.values()), out_dir)
    return manifest.save(out_dir)


def _declared_task(checkpoint_dir: Path) -> str:
    from onnx_models.train.modeling import is_reader_evaluator_checkpoint

    return READER_EVALUATOR if is_reader_evaluator_checkpoint(checkpoint_dir) else "question-answering"


@contextlib.contextmanager
def _legacy_exporter_warnings_silenced() -> Iterator[None]:
    """Both paths use the TorchScript exporter (no onnxscript needed): it is deprecated,
    and its tracer warns about constants in transformers' mask code; known and harmless."""
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", torch.jit.TracerWarning)  # type: ignore[attr-defined]
        yield


def _export_reader_evaluator(checkpoint_dir: Path, target: Path) -> None:
    import torch

    from onnx_models.train.modeling import ReaderEvaluatorModel

    model = ReaderEvaluatorModel.load(checkpoint_dir)
    sample = torch.ones((2, 16), dtype=torch.long)
    axes = {0: "batch", 1: "sequence"}
    with torch.no_grad(), _legacy_exporter_warnings_silenced():
        torch.onnx.export(
            model,
            (sample, sample, torch.zeros_like(sample)),
            str(target),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["start_logits", "end_logits", "relevance_logits"],
            dynamic_axes={
                "input_ids": axes,
                "attention_mask": axes,
                "token_type_ids": axes,
                "start_logits": axes,
                "end_logits": axes,
                "relevance_logits": {0: "batch"},
            },
            opset_version=_OPSET,
            dynamo=False,  # the TorchScript exporter handles dynamic_axes without onnxscript
        )


def _export_with_optimum(checkpoint_dir: Path, task: str, tmp: Path, target: Path) -> None:
    try:
        from optimum.exporters.onnx import main_export  # type: ignore[import-untyped]
    except ModuleNotFoundError as exc:
        raise ModelError("exporting standard checkpoints needs optimum: pip install 'answerbox[export]'") from exc
    with _legacy_exporter_warnings_silenced():
        main_export(model_name_or_path=str(checkpoint_dir), output=tmp, task=task, opset=_OPSET, do_validation=False)
    shutil.move(tmp / "model.onnx", target)


def to_fp16(fp32: Path, target: Path) -> Path:
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    # Inputs and outputs stay fp32/int64 so callers feed and read the same arrays for every variant.
    model = convert_float_to_float16(onnx.load(str(fp32)), keep_io_types=True)
    onnx.save(model, str(target))
    return target


def to_int8(
    fp32: Path,
    target: Path,
    keep_fp32: Sequence[str] | None = None,
    per_token: Sequence[str] | None = None,
    smooth: Sequence[str] = (),
) -> Path:
    """Dynamic int8 of ``fp32``; the nodes in ``keep_fp32`` (default: :func:`output_heads`) stay fp32,
    the MatMuls in ``smooth`` (default: none) have their input's outlier channels folded into their
    weights (``smoothing``), and the MatMuls in ``per_token`` (default: the feed-forward
    projections) get one activation scale per token (``row_scaling``)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from onnx_models.export.row_scaling import feed_forward, scale_rows
    from onnx_models.export.smoothing import smooth_channels

    # Dynamic quantization: int8 weights, activations quantized per batch at run time; no
    # calibration data needed, and it is the variant that pays off on CPU. Per-channel
    # weight scales: per-tensor cost the default model 6 F1 on SQuAD dev, per-channel ~0.
    # 7-bit weights (reduce_range): CPUs without VNNI (AVX2, plain AVX-512) multiply u8·s8
    # pairs into saturating int16 sums, which 8-bit weights overflow; 7-bit ones cannot, so
    # every x86-64 CPU computes the same logits (an AVX2 CPU's error was 12x an AVX-512's).
    model = onnx.load(str(fp32))
    keep = output_heads(model) if keep_fp32 is None else list(keep_fp32)
    # ONNX Runtime rewrites each Gemm as a MatMul named "<gemm>_MatMul" before it matches names.
    keep += [f"{name}_MatMul" for name in keep]
    smooth_channels(model, [n for n in smooth if n not in keep])
    scale_rows(model, [n for n in (feed_forward(model) if per_token is None else per_token) if n not in keep])
    quantize_dynamic(
        model,
        str(target),
        weight_type=QuantType.QInt8,
        per_channel=True,
        reduce_range=True,
        nodes_to_exclude=keep,
        # ONNX shape inference cannot type the outputs of ONNX Runtime's fused (com.microsoft)
        # ops, as in a graph through its transformer optimizer (onnx_models/LOG.md, eighteenth stop): float.
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )
    return target


def output_heads(model: onnx.ModelProto) -> list[str]:
    """The last MatMul/Gemm on every path to a graph output: the heads whose logits are the answer.

    They are a sliver of the compute (384→2 and 384→1 here), so int8 saves nothing there,
    while its rounding lands on the span and relevance logits unsoftened by any later layer.
    """
    graph = model.graph
    producer = {out: node for node in graph.node for out in node.output}
    heads: list[str] = []
    seen: set[str] = set()
    pending = [o.name for o in graph.output]
    while pending:
        node = producer.get(pending.pop())
        if node is None or node.name in seen:
            continue
        seen.add(node.name)
        if node.op_type in ("MatMul", "Gemm"):
            heads.append(node.name)
        else:
            pending.extend(node.input)
    return sorted(heads)


def _copy_tokenizer(checkpoint_dir: Path, target: Path) -> None:
    source = checkpoint_dir / "tokenizer.json"
    if source.exists():
        shutil.copyfile(source, target)
        return
    # Checkpoints with only a slow tokenizer: let transformers convert it once.
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint_dir, use_fast=True)  # type: ignore[no-untyped-call]
    tokenizer.backend_tokenizer.save(str(target))


def _io_names(model_path: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    import onnx

    graph = onnx.load(str(model_path), load_external_data=False).graph
    initializers = {i.name for i in graph.initializer}
    inputs = tuple(i.name for i in graph.input if i.name not in initializers)
    return inputs, tuple(o.name for o in graph.output)
