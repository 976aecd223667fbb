"""What int8 costs in reader accuracy, and what keeping some nodes in fp32 buys back.

    PYTHONPATH=plugin:. python -m bench.quantization --limit 2000

Quantizes the model directory's fp32 graph once per candidate (dynamic int8 as
``answerbox models export`` does, with another set of nodes kept in fp32), then reads the
same seeded SQuAD v1.1 dev questions with their gold paragraphs through each, and with the
fp32 graph itself, in this run. Prints EM/F1, F1 against fp32, and pairs/s at batch 1 and 16.
The speeds are medians over ``--rounds`` in which every graph takes a turn, and with
``--checkpoint`` PyTorch eager too; each ratio (to fp32, to PyTorch) is the median of the
per-round ratios, as in ``bench.model_throughput``.

Candidates: ``none`` (every MatMul and embedding table int8), ``heads`` (the export's
default: the output heads in fp32), ``heads+last_layer`` (and the last encoder layer),
``heads+ffn_out`` (and every feed-forward down-projection, whose GELU inputs carry the
outliers int8 clips worst), ``heads+embeddings`` (and the word, position and token-type
tables, which ONNX Runtime stores as uint8 with one scale per table), ``heads+ffn_out_per_token``
(the heads in fp32, every down-projection int8 with one activation scale per token:
``onnx_models.export.row_scaling``), ``heads+ffn_per_token`` (the up-projections too),
``heads+attention_in+ffn_out_per_token`` (the query, key and value projections' shared input
too), ``heads+all_per_token`` (every projection but the heads per token). Smoothed per channel
(``onnx_models.export.smoothing``): ``heads+smooth_up`` (the up-projections' input),
``heads+smooth_normalized`` (every LayerNorm output a projection reads: query/key/value and
up), each also ``+ffn_out_per_token`` (the down-projections per token), and ``heads+smooth_all``
(the down-projections smoothed too).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Literal

import onnx
from answerbox.core.config import ModelSettings
from answerbox.models import load_models
from answerbox.models.manifest import ModelManifest
from answerbox.models.session import CPU

from bench.harness import Timed, first_windows, interleaved_pairs_per_s, median_ratio, onnx_runner, torch_runner
from onnx_models.data.squad import DEV_FILE, default_tarball, load_squad, sample_questions
from onnx_models.evaluate.reading import evaluate
from onnx_models.export.row_scaling import down_projections, feed_forward, projections
from onnx_models.export.smoothing import layer_norm_inputs
from onnx_models.export.variants import output_heads, to_int8

_LAYER = re.compile(r"/layer\.(\d+)/")


def candidates(fp32: Path) -> dict[str, tuple[list[str], list[str], list[str]]]:
    """Each candidate's nodes kept in fp32, its MatMuls quantized per token and those smoothed per channel."""
    model = onnx.load(str(fp32), load_external_data=False)
    graph = model.graph
    linear = [n.name for n in graph.node if n.op_type in ("MatMul", "Gemm")]
    tables = {t.name for t in graph.initializer}
    lookups = [n.name for n in graph.node if n.op_type == "Gather" and n.input[0] in tables]
    heads = output_heads(model)
    last = max((int(m[1]) for n in linear if (m := _LAYER.search(n))), default=-1)
    ffn_out = down_projections(model)
    weighted = [n for n in projections(model) if n not in heads]
    attention_in = [n for n in weighted if n.endswith(("/self/query/MatMul", "/self/key/MatMul", "/self/value/MatMul"))]
    normalized = [n for n in layer_norm_inputs(model) if n not in heads]
    up = [n for n in normalized if n not in attention_in]
    return {
        "none": ([], [], []),
        "heads": (heads, [], []),
        "heads+last_layer": (heads + [n for n in linear if f"/layer.{last}/" in n], [], []),
        "heads+ffn_out": (heads + ffn_out, [], []),
        "heads+embeddings": (heads + lookups, [], []),
        "heads+ffn_out_per_token": (heads, ffn_out, []),
        "heads+ffn_per_token": (heads, feed_forward(model), []),
        "heads+attention_in+ffn_out_per_token": (heads, attention_in + ffn_out, []),
        "heads+all_per_token": (heads, weighted, []),
        "heads+smooth_up": (heads, [], up),
        "heads+smooth_normalized": (heads, [], normalized),
        "heads+smooth_up+ffn_out_per_token": (heads, ffn_out, up),
        "heads+smooth_normalized+ffn_out_per_token": (heads, ffn_out, normalized),
        "heads+smooth_all": (heads, [], normalized + ffn_out),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", type=Path, default=ModelSettings().dir)
    parser.add_argument(
        "--checkpoint", type=Path, help="the PyTorch checkpoint exported: also time it, as the baseline"
    )
    parser.add_argument("--data", type=Path, default=default_tarball())
    parser.add_argument("--limit", type=int, default=2000, help="seeded sample of dev questions")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--pairs", type=int, default=96, help="windows timed per configuration")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds (medians are reported)")
    parser.add_argument("--only", nargs="*", help="candidates to run (default: all)")
    args = parser.parse_args()

    manifest = ModelManifest.load(args.model_dir)
    fp32 = manifest.model_path(args.model_dir, "fp32")
    paragraphs = load_squad([DEV_FILE], args.data)
    questions = sample_questions(paragraphs, args.limit, args.seed)
    windows = first_windows(args.model_dir, questions[: args.pairs])

    def accuracy(directory: Path, variant: Literal["int8", "fp32", "fp16"]) -> dict[str, float]:
        models = load_models(ModelSettings(dir=directory, variant=variant, providers=[CPU]))
        try:
            result = evaluate(models, questions)
        finally:
            models.close()
        return {"em": result["em"], "f1": result["f1"]}

    rows = {"fp32": accuracy(args.model_dir, "fp32")}
    graphs = {"fp32": fp32}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (keep, per_token, smooth) in candidates(fp32).items():
            if args.only and name not in args.only:
                continue
            directory = Path(tmp) / name
            directory.mkdir()
            shutil.copyfile(args.model_dir / manifest.tokenizer, directory / manifest.tokenizer)
            graphs[name] = to_int8(
                fp32, directory / "model.int8.onnx", keep_fp32=keep, per_token=per_token, smooth=smooth
            )
            manifest.replace(variants={"int8": "model.int8.onnx"}).save(directory)
            rows[name] = {
                "fp32_nodes": len(keep),
                "per_token_nodes": len(per_token),
                "smoothed_nodes": len(smooth),
                **accuracy(directory, "int8"),
            }
        # Every graph (and PyTorch) takes turns in the same rounds, so their speeds compare.
        engines = {name: onnx_runner(path, 0) for name, path in graphs.items()}
        if args.checkpoint and (torch := torch_runner(args.checkpoint, 0)):
            engines["torch_eager"] = torch
        configs = {f"{name}/batch_{b}": Timed(run, b) for name, run in engines.items() for b in (1, 16)}
        timed = interleaved_pairs_per_s(configs, windows, args.rounds)
    base = rows["fp32"]
    for name, row in rows.items():
        row["f1_minus_fp32"] = round(row["f1"] - base["f1"], 2)
        for b in (1, 16):
            row[f"pairs_per_s_batch_{b}"] = round(statistics.median(timed[f"{name}/batch_{b}"]), 1)
            for baseline in ("fp32", "torch_eager"):
                if baseline in engines:
                    ratio = median_ratio(timed[f"{name}/batch_{b}"], timed[f"{baseline}/batch_{b}"])
                    row[f"speed_vs_{baseline}_batch_{b}"] = ratio
    print(json.dumps({"questions": len(questions), "rounds": args.rounds, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
