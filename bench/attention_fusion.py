"""Whether a fused attention makes the int8 graph faster: ONNX Runtime's fusions against the shipped graph.

    PYTHONPATH=plugin:. python -m bench.attention_fusion --checkpoint ~/.cache/answerbox/data/avgq1

At batch 16 the attention core (scores, padding mask, softmax, weighted sum) takes the
largest share of the int8 graph's time (``bench.op_profile``): ONNX Runtime writes every
batch x heads x length x length score tensor out and reads it back op by op, while
PyTorch's scaled-dot-product attention tiles it. Each candidate below is the model
directory's fp32 graph through ONNX Runtime's transformer optimizer (BERT, embeddings left
unfused so the lookup tables stay int8), then quantized as the export does (``to_int8``):

- ``fused_ops``: residual+LayerNorm and bias+GELU fused, attention left as exported;
- ``attention``: and the ``Attention`` contrib op (packed query/key/value, quantized to ``QAttention``);
- ``multihead``: ``MultiHeadAttention`` fed the padding mask;
- ``multihead_flash``: ``MultiHeadAttention`` without a mask input, which is the only case in
  which ONNX Runtime's CPU kernel takes its flash-attention path. The mask rides in a 33rd
  query/key dimension instead: 1 on every query, 0 on a token's key and -10⁴·√32 on a
  padding key, so a padding key scores -10⁴ after scaling and gets no weight.

Prints pairs/s at batch 1 and 16 (interleaved rounds, medians; ratios are medians of
per-round ratios, as in ``bench.model_throughput``) for the shipped int8 graph, each
candidate and, with ``--checkpoint``, PyTorch; and for each candidate's fp32 graph the
largest change of a logit on real tokens against the exported fp32 graph (the rewrites are
exact, so float rounding only).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import onnx
from answerbox.config import ModelSettings
from answerbox.models.export import to_int8
from answerbox.models.manifest import ModelManifest
from answerbox.models.session import CPU, OnnxSession
from answerbox.models.windows import Window, pad_windows
from onnx import TensorProto, helper, numpy_helper

from bench.model_throughput import Timed, dev_windows, interleaved_pairs_per_s, median_ratio, onnx_runner, torch_runner
from onnx_models.squad import default_tarball

# A padding key's score after scaling: exp(-1e4) is 0 in float32.
_PADDING_SCORE = -1e4


def optimized(fp32: Path, target: Path, attention: str | None) -> Path:
    """``fp32`` through the transformer optimizer; ``attention``: None, "attention" or "multihead"."""
    from onnxruntime.transformers.fusion_options import AttentionMaskFormat, FusionOptions  # type: ignore[import-untyped]
    from onnxruntime.transformers.optimizer import optimize_model  # type: ignore[import-untyped]

    options = FusionOptions("bert")
    options.enable_embed_layer_norm = False
    options.enable_attention = attention is not None
    options.use_multi_head_attention = attention == "multihead"
    options.attention_mask_format = AttentionMaskFormat.AttentionMask
    model = optimize_model(
        str(fp32),
        model_type="bert",
        num_heads=0,  # 0: read from the graph's reshapes
        hidden_size=0,
        optimization_options=options,
        opt_level=0,
    )
    model.save_model_to_file(str(target))
    return target


def mask_in_keys(source: Path, target: Path) -> Path:
    """Rewrite every ``MultiHeadAttention(q, k, v, bias, mask)`` as an unmasked one (module docstring)."""
    model = onnx.load(str(source))
    graph = model.graph
    weights = {t.name: t for t in graph.initializer}
    attention = [n for n in graph.node if n.op_type == "MultiHeadAttention"]
    if not attention:
        raise ValueError(f"{source} has no MultiHeadAttention node")
    heads = next(a.i for a in attention[0].attribute if a.name == "num_heads")
    size = numpy_helper.to_array(weights[attention[0].input[3]]).size // 3 // heads
    added = {
        "fa/split4": np.array([0, 0, heads, size], np.int64),
        "fa/join3": np.array([0, 0, heads * (size + 1)], np.int64),
        "fa/pad_last": np.array([0, 0, 0, 0, 0, 0, 0, 1], np.int64),
        "fa/one": np.array(1.0, np.float32),
        "fa/zero": np.array(0.0, np.float32),
        "fa/padding": np.array(-_PADDING_SCORE * math.sqrt(size), np.float32),
        "fa/last": np.eye(size + 1, dtype=np.float32)[-1],
        "fa/axes": np.array([2, 3], np.int64),
    }
    # (mask - 1) * 1e4·√d on the extra dimension only: shape (batch, length, 1, d + 1).
    nodes = [
        helper.make_node("Cast", ["attention_mask"], ["fa/mask"], to=TensorProto.FLOAT),
        helper.make_node("Sub", ["fa/mask", "fa/one"], ["fa/off"]),
        helper.make_node("Mul", ["fa/off", "fa/padding"], ["fa/offset"]),
        helper.make_node("Unsqueeze", ["fa/offset", "fa/axes"], ["fa/offset4"]),
        helper.make_node("Mul", ["fa/offset4", "fa/last"], ["fa/key_offset"]),
    ]
    for node in graph.node:
        if node.op_type != "MultiHeadAttention":
            nodes.append(node)
            continue
        name = node.name
        bias = numpy_helper.to_array(weights[node.input[3]])
        for i, part in enumerate("qkv"):
            added[f"{name}/{part}_bias"] = bias[i * heads * size : (i + 1) * heads * size]
            nodes.append(helper.make_node("Add", [node.input[i], f"{name}/{part}_bias"], [f"{name}/{part}"]))
        for part, fill in (("q", "fa/one"), ("k", "fa/zero")):
            nodes.append(helper.make_node("Reshape", [f"{name}/{part}", "fa/split4"], [f"{name}/{part}4"]))
            nodes.append(helper.make_node("Pad", [f"{name}/{part}4", "fa/pad_last", fill], [f"{name}/{part}_padded"]))
        nodes.append(helper.make_node("Add", [f"{name}/k_padded", "fa/key_offset"], [f"{name}/k_masked"]))
        nodes.append(helper.make_node("Reshape", [f"{name}/q_padded", "fa/join3"], [f"{name}/q_wide"]))
        nodes.append(helper.make_node("Reshape", [f"{name}/k_masked", "fa/join3"], [f"{name}/k_wide"]))
        nodes.append(
            helper.make_node(
                "MultiHeadAttention",
                [f"{name}/q_wide", f"{name}/k_wide", f"{name}/v"],
                list(node.output),
                name=name,
                domain="com.microsoft",
                num_heads=heads,
                scale=1.0 / math.sqrt(size),  # the head size of q and k, not of the widened ones
            )
        )
    del graph.node[:]
    graph.node.extend(nodes)
    graph.initializer.extend(numpy_helper.from_array(value, name) for name, value in added.items())
    onnx.save(model, str(target))
    return target


def largest_change(reference: Path, candidate: Path, windows: Sequence[Window]) -> float:
    """The largest |logit change| over real tokens (start, end) and windows (relevance)."""
    ids, mask, types = pad_windows(windows)
    feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    a, b = (OnnxSession(p, providers=[CPU]).run(feed) for p in (reference, candidate))
    real = mask.astype(bool)
    spans = max(float(np.abs(a[k] - b[k])[real].max()) for k in ("start_logits", "end_logits"))
    return max(spans, float(np.abs(a["relevance_logits"] - b["relevance_logits"]).max()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", type=Path, default=ModelSettings().dir)
    parser.add_argument("--checkpoint", type=Path, help="the PyTorch checkpoint exported: also time it")
    parser.add_argument("--data", type=Path, default=default_tarball())
    parser.add_argument("--pairs", type=int, default=96, help="windows timed per configuration")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds (medians are reported)")
    parser.add_argument("--seed", type=int, default=3, help="dev questions drawn (bench.model_throughput's)")
    args = parser.parse_args()

    manifest = ModelManifest.load(args.model_dir)
    fp32 = manifest.model_path(args.model_dir, "fp32")
    windows = dev_windows(args.model_dir, args.data, args.pairs, args.seed)
    report: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        candidates = {
            name: optimized(fp32, work / f"{name}.onnx", attention)
            for name, attention in (("fused_ops", None), ("attention", "attention"), ("multihead", "multihead"))
        }
        candidates["multihead_flash"] = mask_in_keys(candidates["multihead"], work / "multihead_flash.onnx")
        graphs = {"shipped": manifest.model_path(args.model_dir, "int8")}
        for name, graph in candidates.items():
            report[name] = {"fp32_largest_logit_change": round(largest_change(fp32, graph, windows[:16]), 6)}
            graphs[name] = to_int8(graph, work / f"{name}.int8.onnx")
        engines: dict[str, Callable[..., object]] = {name: onnx_runner(path, 0) for name, path in graphs.items()}
        if args.checkpoint and (torch := torch_runner(args.checkpoint, 0)):
            engines["torch_eager"] = torch
        configs = {f"{name}/batch_{b}": Timed(run, b) for name, run in engines.items() for b in (1, 16)}
        timed = interleaved_pairs_per_s(configs, windows, args.rounds)
    for name in engines:
        row = report.setdefault(name, {})
        for b in (1, 16):
            row[f"pairs_per_s_batch_{b}"] = round(statistics.median(timed[f"{name}/batch_{b}"]), 1)
            for baseline in ("shipped", "torch_eager"):
                if baseline in engines and baseline != name:
                    row[f"speed_vs_{baseline}_batch_{b}"] = median_ratio(
                        timed[f"{name}/batch_{b}"], timed[f"{baseline}/batch_{b}"]
                    )
    print(json.dumps({"pairs": len(windows), "rounds": args.rounds, "rows": report}, indent=2))


if __name__ == "__main__":
    main()
