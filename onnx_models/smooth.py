"""SmoothQuant for the dynamic int8 variant: move activation outliers into the weights first.

    PYTHONPATH=plugin:. python -m onnx_models.smooth --model-dir DIR      # after export, before calibrate

A few hidden channels carry activations far larger than the rest: in the default model the
LayerNorm before each feed-forward block reaches 28 on one channel against a median channel
maximum of 1.8, the GELU output before the down-projection 24 against 1.3. Dynamic int8
quantizes a MatMul's input with one scale per batch, so those channels set the step and the
other channels keep a handful of levels. SmoothQuant (Xiao et al., 2023) divides input
channel j by ``s_j = max|X_j|^α / max|W_j|^(1−α)`` and multiplies row j of the weight by
it: the product is unchanged in exact arithmetic, the activation range is flatter, and the
weights, quantized per output channel, take up the rest.

Smoothing is not a gain everywhere: the GELU output's negative tail is the same on every
channel, so dividing its quiet channels by s < 1 stretches the tail across the one asymmetric
u8 range (the simulated error of layer 0's down-projection doubled at α = 0.5). So each
MatMul group gets the α of ``--alphas``, or none, whose int8 error, simulated on the
calibration tokens with the runtime's scheme, is lowest.

The fp32 graph is left as it is; ``DIR/model.int8.onnx`` is rebuilt from a smoothed copy with
the export's quantization (:func:`answerbox.models.export.to_int8`, heads in fp32). Channel
ranges come from a seeded sample of training windows (squad_shifts new_wiki + nyt, never
dev); the manifest records how under ``quantization``.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnx
from answerbox.models.export import output_heads, to_int8
from answerbox.models.manifest import ModelManifest
from answerbox.models.session import CPU, import_onnxruntime
from answerbox.models.windows import WindowTokenizer, load_tokenizer, pad_windows
from onnx import numpy_helper

from onnx_models.squad import TRAIN_FILES, default_tarball, load_squad, sample_questions

__all__ = ["ALPHAS", "SEED", "WINDOWS", "Observed", "calibration_feeds", "choose_scale", "int8_error", "linear_inputs", "observe", "smooth", "smoothed_int8"]

log = logging.getLogger("answerbox.smooth")

Feeds = dict[str, npt.NDArray[np.int64]]
Array = npt.NDArray[np.float32]

ALPHAS = (0.25, 0.5, 0.75)  # around SmoothQuant's default of 0.5
WINDOWS = 256
SEED = 3

# What to_int8 does: dynamic u8 activations over the whole tensor, symmetric 7-bit weights per column.
_WEIGHT_LEVELS = 63


@dataclass(frozen=True, slots=True)
class Observed:
    peak: Array  # per-channel max |x| over every real token
    sample: Array  # [tokens, channels]: real tokens to simulate quantization on


def linear_inputs(graph: onnx.GraphProto, skip: Iterable[str] = ()) -> dict[str, list[onnx.NodeProto]]:
    """Activation tensor → the MatMuls with a constant 2-D weight that read it (Q, K and V share one)."""
    weights = {init.name for init in graph.initializer if len(init.dims) == 2}
    skipped = set(skip)
    groups: dict[str, list[onnx.NodeProto]] = defaultdict(list)
    for node in graph.node:
        if node.op_type == "MatMul" and node.input[1] in weights and node.name not in skipped:
            groups[node.input[0]].append(node)
    return dict(groups)


def observe(model: onnx.ModelProto, tensors: Sequence[str], feeds: Iterable[Feeds], sample_tokens: int = 4096) -> dict[str, Observed]:
    """Each tensor's per-channel peak over the real (unpadded) tokens of every batch, and its first tokens."""
    ort = import_onnxruntime()
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    known = {o.name for o in probe.graph.output}
    probe.graph.output.extend(onnx.ValueInfoProto(name=t) for t in tensors if t not in known)
    session = ort.InferenceSession(probe.SerializeToString(), providers=[CPU])
    peaks: dict[str, Array] = {}
    samples: dict[str, list[Array]] = defaultdict(list)
    kept = 0
    for batch in feeds:
        real = batch["attention_mask"] == 1
        for name, values in zip(tensors, session.run(list(tensors), batch), strict=True):
            tokens = values[real]
            peak = np.abs(tokens).max(axis=0)
            peaks[name] = np.maximum(peaks[name], peak) if name in peaks else peak
            if kept < sample_tokens:
                samples[name].append(tokens[: sample_tokens - kept])
        kept += int(real.sum())
    return {name: Observed(peaks[name], np.concatenate(samples[name])) for name in tensors}


def _fake_int8_activations(x: Array) -> Array:
    low, high = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    step = (high - low) / 255 or 1.0
    zero = round(-low / step)
    return ((np.clip(np.round(x / step) + zero, 0, 255) - zero) * step).astype(np.float32)


def _fake_int8_weights(w: Array) -> Array:
    step = np.abs(w).max(axis=0) / _WEIGHT_LEVELS
    step = np.where(step > 0, step, 1.0)
    return (np.round(w / step) * step).astype(np.float32)


def int8_error(x: Array, weights: Sequence[Array], s: Array) -> float:
    """Relative squared error of the group's outputs once its input is divided by ``s`` and its weights multiplied."""
    quantized = _fake_int8_activations(x / s)
    errors = []
    for w in weights:
        exact = x @ w
        errors.append(float(np.square(exact - quantized @ _fake_int8_weights(w * s[:, None])).sum() / np.square(exact).sum()))
    return float(np.mean(errors))


def choose_scale(observed: Observed, weights: Sequence[Array], alphas: Sequence[float]) -> tuple[float | None, Array]:
    """The α (None: no smoothing) with the lowest simulated int8 error, and its per-channel s."""
    weight_peak = np.max([np.abs(w).max(axis=1) for w in weights], axis=0)
    live = (observed.peak > 0) & (weight_peak > 0)  # a channel that never fired, or a dead row, keeps s = 1
    options: list[tuple[float | None, Array]] = [(None, np.ones_like(observed.peak))]
    for alpha in alphas:
        s = observed.peak**alpha / np.maximum(weight_peak, 1e-8) ** (1 - alpha)
        options.append((alpha, np.where(live, s, 1.0).astype(np.float32)))
    return min(options, key=lambda option: int8_error(observed.sample, weights, option[1]))


def smooth(model: onnx.ModelProto, scales: dict[str, Array]) -> onnx.ModelProto:
    """A copy of ``model`` whose MatMuls reading each tensor in ``scales`` read it divided by s, with weights times s."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    weights = {init.name: init for init in graph.initializer}
    groups = linear_inputs(graph)
    first_reader: dict[str, onnx.NodeProto] = {}
    for tensor, s in scales.items():
        readers = groups[tensor]
        for node in readers:
            w = numpy_helper.to_array(weights[node.input[1]])
            weights[node.input[1]].CopyFrom(numpy_helper.from_array((w * s[:, None]).astype(w.dtype), node.input[1]))
            node.input[0] = f"{tensor}/smoothed"
        graph.initializer.append(numpy_helper.from_array((1.0 / s).astype(np.float32), f"{tensor}/smoothing"))
        first_reader[tensor] = readers[0]
    # Each Mul goes right before the first node that reads its output: the graph stays sorted.
    nodes = list(graph.node)
    del graph.node[:]
    for node in nodes:
        graph.node.extend(
            onnx.helper.make_node("Mul", [tensor, f"{tensor}/smoothing"], [f"{tensor}/smoothed"])
            for tensor, reader in first_reader.items()
            if reader is node
        )
        graph.node.append(node)
    return out


def calibration_feeds(tokenizer: WindowTokenizer, tarball: Path, windows: int, seed: int, batch: int = 16) -> list[Feeds]:
    """Batches of training windows: each sampled question with the windows of its own paragraph."""
    pairs = sample_questions(load_squad(TRAIN_FILES, tarball), windows, seed)
    sample = [w for p, q in pairs for w in tokenizer.windows(q.text, [p.context])][:windows]
    feeds = []
    for start in range(0, len(sample), batch):
        ids, mask, types = pad_windows(sample[start : start + batch])
        feeds.append({"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
    return feeds


def smoothed_int8(fp32: Path, target: Path, feeds: Sequence[Feeds], alphas: Sequence[float]) -> dict[str, float | None]:
    """Write ``target``, the dynamic int8 of ``fp32`` after smoothing (heads fp32, unsmoothed); the α chosen per input."""
    heads = output_heads(fp32)
    model = onnx.load(str(fp32))
    groups = linear_inputs(model.graph, heads)
    observed = observe(model, list(groups), feeds)
    weights = {init.name: init for init in model.graph.initializer}
    chosen: dict[str, float | None] = {}
    scales: dict[str, Array] = {}
    for tensor, readers in groups.items():
        arrays = [numpy_helper.to_array(weights[node.input[1]]) for node in readers]
        chosen[tensor], s = choose_scale(observed[tensor], arrays, alphas)
        if chosen[tensor] is not None:
            scales[tensor] = s
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "smoothed.fp32.onnx"
        onnx.save(smooth(model, scales), str(path))
        to_int8(path, target, keep_fp32=heads)
    return chosen


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", type=Path, required=True, help="an exported model directory (fp32 variant)")
    parser.add_argument("--data", type=Path, default=default_tarball())
    parser.add_argument("--alphas", type=float, nargs="+", default=list(ALPHAS), help="migration strengths to try")
    parser.add_argument("--windows", type=int, default=WINDOWS, help="training windows the ranges are taken on")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)
    manifest = ModelManifest.load(args.model_dir)
    tokenizer = WindowTokenizer(
        load_tokenizer(args.model_dir / manifest.tokenizer), max_length=manifest.max_length, stride=manifest.stride
    )
    feeds = calibration_feeds(tokenizer, args.data, args.windows, args.seed)
    target = args.model_dir / manifest.variants.get("int8", "model.int8.onnx")
    chosen = smoothed_int8(manifest.model_path(args.model_dir, "fp32"), target, feeds, args.alphas)
    record = {
        "smoothing": "SmoothQuant, α per MatMul input by simulated int8 error",
        "data": list(TRAIN_FILES),
        "windows": args.windows,
        "seed": args.seed,
        "alphas": args.alphas,
        "alpha_by_input": chosen,
    }
    manifest.replace(variants={**manifest.variants, "int8": target.name}, quantization=record).save(args.model_dir)
    log.info("wrote %s: %d of %d MatMul inputs smoothed", target, sum(a is not None for a in chosen.values()), len(chosen))


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    main()
