"""Where a graph's time goes: ONNX Runtime's own profile of the model, grouped by what each node does.

    PYTHONPATH=plugin:. python -m bench.op_profile --batch 1 16

Runs the same SQuAD dev windows as ``bench.model_throughput`` through each variant with
ONNX Runtime's profiler on and sums its per-node kernel times into:

- ``projections``: the weight MatMuls (int8 or fp32), with the int8 graph's activation quantizers;
- ``per_token_scaling``: the row maxima, divisions and rescaling ``answerbox.models.row_scaling``
  adds before the feed-forward projections (int8 only);
- ``attention_core``: the scores, their mask and softmax, the weighted sum and its transposes
  (every node of ``/attention/self/`` that is not a query, key or value projection);
- ``other``: LayerNorm, GELU, embeddings, the heads, shapes.

Shares are of the summed kernel time; profiling slows every kernel alike, so pairs/s here
are lower than ``bench.model_throughput``'s and only the shares are meant to be compared.
"""

from __future__ import annotations

import argparse
import collections
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path

from answerbox.config import ModelSettings
from answerbox.models.manifest import ModelManifest
from answerbox.models.session import CPU, import_onnxruntime
from answerbox.models.windows import Window, pad_windows

from bench.model_throughput import dev_windows
from onnx_models.squad import default_tarball

_PROJECTION_OPS = frozenset(
    {"DynamicQuantizeMatMul", "MatMulIntegerToFloat", "MatMulInteger", "DynamicQuantizeLinear", "Gemm", "FusedMatMul"}
)
_SCALING_STEPS = ("/Abs", "/RowMax", "/Clamp", "/ScaleRows", "/Unscale")
_PROJECTED = ("/query/", "/key/", "/value/")


def group(node: str, op: str) -> str:
    """The part of the encoder a profiled node belongs to (see the module docstring)."""
    if any(step in node for step in _SCALING_STEPS):
        return "per_token_scaling"
    if "/attention/self/" in node and not any(p in node for p in _PROJECTED):
        return "attention_core"
    if op in _PROJECTION_OPS or (op == "MatMul" and "/dense/" in node) or any(p in node for p in _PROJECTED):
        return "projections"
    return "other"


def profile(path: Path, windows: Sequence[Window], batch: int) -> dict[str, object]:
    ort = import_onnxruntime()
    with tempfile.TemporaryDirectory() as tmp:
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(tmp) / "profile")
        session = ort.InferenceSession(str(path), sess_options=options, providers=[CPU])
        batches = [pad_windows(windows[i : i + batch]) for i in range(0, len(windows), batch)]
        feeds = [{"input_ids": b[0], "attention_mask": b[1], "token_type_ids": b[2]} for b in batches]
        session.run(None, feeds[0])  # warm-up, profiled too: dropped below by its run index
        for feed in feeds:
            session.run(None, feed)
        events = json.loads(Path(session.end_profiling()).read_text())
    runs = [e for e in events if e.get("cat") == "Session" and e["name"] == "model_run"]
    timed_from = runs[1]["ts"] if len(runs) > 1 else 0
    seconds = sum(e["dur"] for e in runs[1:]) / 1e6
    micros: collections.Counter[str] = collections.Counter()
    by_op: collections.Counter[str] = collections.Counter()
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time") and e["ts"] >= timed_from:
            op = e["args"]["op_name"]
            micros[group(e["name"].removesuffix("_kernel_time"), op)] += e["dur"]
            by_op[op] += e["dur"]
    total = sum(micros.values()) or 1
    return {
        "pairs_per_s_profiled": round(len(windows) / seconds, 1) if seconds else None,
        "share": {name: round(micros[name] / total, 3) for name in sorted(micros, key=micros.__getitem__, reverse=True)},
        "top_ops": {op: round(us / total, 3) for op, us in by_op.most_common(8)},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", type=Path, default=ModelSettings().dir)
    parser.add_argument("--variants", nargs="+", default=["int8", "fp32"])
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--data", type=Path, default=default_tarball())
    parser.add_argument("--pairs", type=int, default=96, help="windows profiled per configuration")
    parser.add_argument("--seed", type=int, default=3, help="dev questions drawn (bench.model_throughput's)")
    args = parser.parse_args()

    manifest = ModelManifest.load(args.model_dir)
    windows = dev_windows(args.model_dir, args.data, args.pairs, args.seed)
    report = {
        f"{variant}/batch_{batch}": profile(manifest.model_path(args.model_dir, variant), windows, batch)
        for variant in args.variants
        for batch in args.batch
    }
    print(json.dumps({"pairs": len(windows), "profiles": report}, indent=2))


if __name__ == "__main__":
    main()
