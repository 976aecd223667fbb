"""The reader/evaluator on a GPU: where each graph ran, agreement with the CPU fp32 graph, pairs/s, answerbox end to
end.

    HF_HUB_OFFLINE=1 PYTHONPATH=plugin:. python -m bench.gpu_serving --device cuda
    HF_HUB_OFFLINE=1 PYTHONPATH=plugin:. python -m bench.gpu_serving --device cpu --pairs 50 --questions 20 --seconds 1

``deploy/gpu/check.sh`` runs it on a lent GPU machine (``deploy/gpu/README.md``).

1. Graphs: int8 and fp32 from ``--model-dir`` (fp32 rebuilt from its packed form where
   missing, as ``answerbox models unpack`` does), fp16 converted from fp32 by the export's own
   converter, into a temporary model directory. Each is loaded with ``--device``'s provider
   through answerbox's ``OnnxSession``; ONNX Runtime's profile of one batch says which provider
   each node ran on. A graph runs on the device when its session's provider is the device's and
   at least ``--min-device-share`` of its profiled node time ran there. With ``--device cuda``,
   fp16 or fp32 falling back, or answerbox's own server logging another provider, fails the
   run (exit 1); int8 is measured only where it runs on the device.
2. Agreement with the CPU fp32 graph on ``--pairs`` questions, each read against its gold
   paragraph and scored against its BM25 top 10 (``onnx_models.data.squad.BM25`` over the corpus):
   the same best span, the same order of the 10 by the evaluator's score, the largest logit
   difference, through answerbox's reader and evaluator (micro-batcher included).
3. pairs/s of each device graph at ``--batches``, through ``OnnxSession`` with IO binding (what
   answerbox does on a GPU) and without, and of the CPU int8 graph (what answerbox serves
   without a GPU) in the same run, on the first window of each question with its gold paragraph.
4. answerbox end to end: osmem-server with the corpus, ``answerbox serve`` in its own process
   with ``--serve-variant`` on the device, the extractive pipeline (``retrieval_evaluator`` then
   ``cited_answer``, no LLM). For each of ``--clients`` concurrent clients, ``--questions``
   questions no other level asked (the encoder caches what it read): p50/p99 per search, as the
   client saw it and as answerbox timed it, and searches/s.

Data: SQuAD v1.1 dev, from the bigbench tarball or a folder holding ``squaddev_v1.1.json.gz``
(``--squad``; default the tarball in the data cache), else, where that is missing and
``--squad`` was not given, the sample corpus ``deploy/embedded`` ships (346 dev paragraphs,
2,145 questions). The report says which. Checks that fail exit 2 (``--device cuda`` adds the
issue's bounds on speed and latency); the JSON report goes to stdout and ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import yaml
from answerbox.core.config import ModelSettings
from answerbox.models import Models, load_models
from answerbox.models.encoder import WindowOutput
from answerbox.models.manifest import ModelManifest
from answerbox.models.session import CPU, OnnxSession, import_onnxruntime
from answerbox.models.windows import Window, pad_windows
from answerbox.ops.children import stop
from osmem_server import OsmemServer

from bench.harness import SQUAD_INDEX, Batch, first_windows, free_port, quantile, sample_corpus
from onnx_models.data.squad import (
    BM25,
    DEV_FILE,
    Paragraph,
    Question,
    default_tarball,
    index_with_titles,
    load_squad,
    normalize_answer,
    sample_questions,
)
from onnx_models.export.packing import unpack_fp32
from onnx_models.export.variants import to_fp16  # the export's fp16 converter: export_model needs a PyTorch checkpoint

CUDA = "CUDAExecutionProvider"
PROVIDERS = {"cuda": CUDA, "cpu": CPU}
PIPELINE_ID = "gpu-check"
# The pipeline a new user writes (bench.search_cost's): the evaluator reranks the top 10, the
# reader's cited snippet answers.
PIPELINE = {
    "response_processors": [
        {"retrieval_evaluator": {"text_fields": ["text"], "top_n": 10, "rerank": True}},
        {"cited_answer": {"size": 5}},
    ]
}
TOP_K = 10
# Bounds from the issue (the reader and evaluator on a GPU, measured).
SPAN_AGREEMENT, ORDER_AGREEMENT = 0.99, 0.98
GPU_OVER_CPU_INT8_AT_64, GPU_P50_MS = 20.0, 30.0
# answerbox.models.session logs "<file> runs on <provider>" once per session it creates.
RUNS_ON = " runs on "


@dataclass(frozen=True, slots=True)
class Item:
    """One agreement question: its gold paragraph and its BM25 top 10."""

    paragraph: Paragraph
    question: Question
    top: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Reading:
    """What one graph made of one item, through answerbox's reader and evaluator."""

    outputs: list[list[WindowOutput]]  # per passage (gold first, then the top 10), per window
    span: tuple[int, int]
    order: tuple[int, ...]  # the top 10 by the evaluator's score, best first


# --- data -----------------------------------------------------------------------------


def load_data(squad: Path | None) -> tuple[str, list[Paragraph]]:
    """SQuAD v1.1 dev where it is found, else the shipped sample corpus; and which it was."""
    source = squad or default_tarball()
    if source.exists():
        return f"SQuAD v1.1 dev ({source})", load_squad([DEV_FILE], source)
    if squad is not None:
        raise SystemExit(f"--squad {squad}: no such file or folder")
    return f"the sample corpus (corpus.jsonl, questions.jsonl; no SQuAD dev at {source})", sample_corpus()


def agreement_items(paragraphs: Sequence[Paragraph], count: int, seed: int) -> list[Item]:
    bm25 = BM25([p.context for p in paragraphs])
    items = []
    for paragraph, question in sample_questions(paragraphs, count, seed):
        scores = bm25.scores(question.text)
        top = sorted(range(len(paragraphs)), key=lambda i: -scores[i])[:TOP_K]
        items.append(Item(paragraph, question, tuple(paragraphs[i].context for i in top)))
    return items


# --- graphs and where they run --------------------------------------------------------


def model_dir_with_fp16(source: Path, target: Path) -> Path:
    """``target``: ``source``'s files linked, its fp32 graph rebuilt where missing, plus an fp16 graph and a manifest
    naming it."""
    manifest = ModelManifest.load(source)
    if not manifest.model_path(source, "int8").exists():
        raise SystemExit(f"{source}: no int8 graph")
    fp32 = source / manifest.variants["fp32"]
    if not fp32.exists():
        unpack_fp32(source)
    target.mkdir()
    for name in {*manifest.variants.values(), manifest.tokenizer}:
        (target / name).symlink_to((source / name).resolve())
    fp16 = to_fp16(fp32, target / "model.fp16.onnx")
    manifest.replace(variants={**manifest.variants, "fp16": fp16.name}).save(target)
    return target


def feed(batch: Batch) -> dict[str, np.ndarray]:
    return {"input_ids": batch[0], "attention_mask": batch[1], "token_type_ids": batch[2]}


def placement(path: Path, provider: str, batch: Batch, profiles: Path) -> dict[str, Any]:
    """Which provider ran the nodes of one batch, from ONNX Runtime's profile: nodes, time and CPU op types."""
    ort = import_onnxruntime()
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL  # as OnnxSession sets it
    options.enable_profiling = True
    options.profile_file_prefix = str(profiles / path.stem)
    session = ort.InferenceSession(str(path), sess_options=options, providers=list(dict.fromkeys([provider, CPU])))
    session.run(None, feed(batch))
    events = json.loads(Path(session.end_profiling()).read_text())
    nodes = [e for e in events if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    micros: Counter[str] = Counter()
    for node in nodes:
        micros[node["args"]["provider"]] += node["dur"]
    return {
        "session_provider": session.get_providers()[0],
        "nodes": dict(Counter(n["args"]["provider"] for n in nodes)),
        "node_time_us": dict(micros),
        "device_share": round(micros[provider] / max(1, sum(micros.values())), 4),
        "cpu_op_types": dict(Counter(n["args"]["op_name"] for n in nodes if n["args"]["provider"] == CPU))
        if provider != CPU
        else {},
    }


def on_device(where: dict[str, Any], provider: str, min_share: float) -> bool:
    return bool(
        where["package_provider"] == provider
        and where["session_provider"] == provider
        and where["device_share"] >= min_share
    )


# --- agreement ------------------------------------------------------------------------


def settings(model_dir: Path, variant: str, provider: str) -> ModelSettings:
    return ModelSettings.model_validate({"dir": model_dir, "variant": variant, "providers": [provider]})


async def _read(models: Models, item: Item) -> Reading:
    question = item.question.text
    outputs = await models.encoder.encode(question, [item.paragraph.context, *item.top])
    # Both answers below come from the encoder's cache of what encode just ran.
    [span] = await models.reader.read(question, [item.paragraph.context])
    scores = await models.evaluator.score(question, item.top)
    return Reading(outputs, (span.start, span.end), tuple(sorted(range(len(scores)), key=lambda i: -scores[i])))


async def _read_all(models: Models, items: Sequence[Item], concurrency: int) -> list[Reading]:
    gate = asyncio.Semaphore(concurrency)

    async def one(item: Item) -> Reading:
        async with gate:
            return await _read(models, item)

    return await asyncio.gather(*(one(i) for i in items))


def readings(
    model_settings: ModelSettings, items: Sequence[Item], concurrency: int = 16
) -> tuple[list[Reading], float]:
    models = load_models(model_settings)
    try:
        started = time.perf_counter()
        return asyncio.run(_read_all(models, items, concurrency)), time.perf_counter() - started
    finally:
        models.close()


def max_differences(reference: Sequence[Reading], candidate: Sequence[Reading]) -> dict[str, float]:
    span = relevance = 0.0
    for ref, cand in zip(reference, candidate, strict=True):
        for ref_windows, cand_windows in zip(ref.outputs, cand.outputs, strict=True):
            for r, c in zip(ref_windows, cand_windows, strict=True):
                assert r.start_logits is not None
                assert c.start_logits is not None
                assert r.end_logits is not None
                assert c.end_logits is not None
                span = max(
                    span,
                    float(np.abs(r.start_logits - c.start_logits).max()),
                    float(np.abs(r.end_logits - c.end_logits).max()),
                )
                relevance = max(relevance, abs(r.relevance - c.relevance))
    return {"span_logit": round(span, 5), "relevance_logit": round(relevance, 5)}


def agreement(reference: Sequence[Reading], candidate: Sequence[Reading]) -> dict[str, Any]:
    n = len(reference)
    return {
        "questions": n,
        "same_best_span": round(sum(r.span == c.span for r, c in zip(reference, candidate, strict=True)) / n, 4),
        "same_top10_order": round(sum(r.order == c.order for r, c in zip(reference, candidate, strict=True)) / n, 4),
        "same_top1": round(sum(r.order[0] == c.order[0] for r, c in zip(reference, candidate, strict=True)) / n, 4),
        "max_abs_difference": max_differences(reference, candidate),
    }


# --- pairs/s --------------------------------------------------------------------------


def batches_of(windows: Sequence[Window], size: int) -> list[Batch]:
    """Batches of exactly ``size`` windows, each padded to its longest; the windows repeat where fewer than ``size``."""
    cycled = [windows[i % len(windows)] for i in range(max(size, len(windows) // size * size))]
    return [pad_windows(cycled[i : i + size]) for i in range(0, len(cycled), size)]


def pairs_per_s(run: Callable[[Batch], object], batches: Sequence[Batch], seconds: float) -> float:
    """pairs/s over at least ``seconds``, after as long again unmeasured (first-run allocations, each shape's setup)."""
    rate = 0.0
    for _ in ("warm-up", "measured"):
        done, started = 0, time.perf_counter()
        while not done or time.perf_counter() - started < seconds:
            for batch in batches:
                run(batch)
                done += len(batch[0])
        rate = done / (time.perf_counter() - started)
    return round(rate, 1)


def session_runner(session: OnnxSession, io_binding: bool) -> Callable[[Batch], object]:
    session.io_binding = io_binding

    def run(batch: Batch) -> object:
        return session.run(feed(batch))

    return run


def throughput(
    sessions: dict[str, OnnxSession], device: str, windows: Sequence[Window], sizes: Sequence[int], seconds: float
) -> dict[str, dict[str, float]]:
    """pairs/s per configuration and batch size; ``cpu/int8`` is answerbox's CPU default."""
    modes = (("io_binding", True), ("plain", False)) if device == "cuda" else (("plain", False),)
    out: dict[str, dict[str, float]] = {}
    for size in sizes:
        batches = batches_of(windows, size)
        for name, session in sessions.items():
            for mode, bound in modes if name != "cpu/int8" else (("plain", False),):
                out.setdefault(f"{name}/{mode}", {})[str(size)] = pairs_per_s(
                    session_runner(session, bound), batches, seconds
                )
    return out


# --- answerbox end to end -------------------------------------------------------------


@contextmanager
def answerbox_serving(config: dict[str, Any], work: Path) -> Iterator[tuple[str, Path]]:
    """``answerbox serve`` in its own process (the clients' event loop must not share its
    interpreter lock); yields its URL and the log it writes, where the provider line lands."""
    port = free_port()
    (work / "answerbox.yaml").write_text(yaml.safe_dump({**config, "host": "127.0.0.1", "port": port}))
    log = work / "answerbox.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "answerbox.ops.cli",
                "serve",
                "--config",
                str(work / "answerbox.yaml"),
                "--log-level",
                "warning",
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while not _answers(url):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"answerbox serve did not start (exit code {process.returncode}):\n{log.read_text()[-3000:]}"
                )
            time.sleep(0.2)
        yield url, log
    finally:
        stop(process)


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/_answerbox/stats/search_pipeline", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def served_providers(log: Path) -> list[str]:
    """answerbox's own log lines naming the provider each of its sessions runs on."""
    return [line.split("answerbox.models.session: ", 1)[-1] for line in log.read_text().splitlines() if RUNS_ON in line]


def served_on_device(lines: Sequence[str], provider: str) -> bool:
    return bool(lines) and all(line.endswith(f"{RUNS_ON}{provider}") for line in lines)


def _body(question: str) -> dict[str, Any]:
    return {"query": {"match": {"text": question}}, "size": TOP_K}


async def _searches(url: str, questions: Sequence[Question], clients: int) -> dict[str, Any]:
    pending = list(reversed(questions))
    millis: list[float] = []
    server: list[float] = []
    warnings: Counter[str] = Counter()
    contains = 0

    async def client(http: httpx.AsyncClient, n: int) -> None:
        nonlocal contains
        # Each client its own credentials, as separate users would be: answerbox admits a
        # bounded number of runs per caller (limits.max_runs_per_caller) and answers past it 429.
        auth = httpx.BasicAuth(f"client-{n}", "bench")
        while pending:
            question = pending.pop()
            started = time.perf_counter()
            response = await http.post(
                f"{url}/{SQUAD_INDEX}/_search",
                params={"search_pipeline": PIPELINE_ID},
                json=_body(question.text),
                auth=auth,
            )
            millis.append((time.perf_counter() - started) * 1000)
            response.raise_for_status()
            report = response.json()["ext"]["answerbox"]
            server.append(report["timings_ms"]["total"])
            warnings.update(report["warnings"])
            text = normalize_answer((report.get("answer") or {}).get("text") or "")
            contains += any(normalize_answer(a) and normalize_answer(a) in text for a in question.answers)

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=300, limits=limits) as http:
        started = time.perf_counter()
        await asyncio.gather(*(client(http, n) for n in range(clients)))
        seconds = time.perf_counter() - started
    return {
        "searches": len(questions),
        "p50_ms": round(quantile(millis, 0.5), 1),
        "p99_ms": round(quantile(millis, 0.99), 1),
        "answerbox_total_p50_ms": round(quantile(server, 0.5), 1),
        "answerbox_total_p99_ms": round(quantile(server, 0.99), 1),
        "searches_per_s": round(len(questions) / seconds, 1),
        "warnings": dict(warnings.most_common(5)),
        "answer_contains_gold": round(contains / len(questions), 4),
    }


def end_to_end(
    args: argparse.Namespace, model_dir: Path, paragraphs: Sequence[Paragraph], work: Path
) -> dict[str, Any]:
    levels = args.clients
    asked = [q for _, q in sample_questions(paragraphs, args.questions * len(levels), args.seed + 1)]
    if len(asked) < args.questions * len(levels):
        raise SystemExit(f"{len(asked)} questions in the data: fewer than --questions x the client levels")
    models: dict[str, Any] = {"dir": str(model_dir), "variant": args.serve_variant, "providers": [args.provider]}
    models |= {
        k: v for k, v in (("max_batch", args.serve_max_batch), ("max_wait_ms", args.serve_max_wait_ms)) if v is not None
    }
    report: dict[str, Any] = {"pipeline": PIPELINE, "models": models}
    with OsmemServer.start(japanese=False) as osmem, httpx.Client(timeout=300) as http:
        index_with_titles(http, osmem.url, paragraphs, SQUAD_INDEX)
        with answerbox_serving({"opensearch": {"url": osmem.url}, "models": models}, work) as (url, log):
            http.put(f"{url}/_search/pipeline/{PIPELINE_ID}", json=PIPELINE).raise_for_status()
            # Loads the models: not part of any level's time.
            http.post(
                f"{url}/{SQUAD_INDEX}/_search", params={"search_pipeline": PIPELINE_ID}, json=_body("warm up")
            ).raise_for_status()
            report["served_on"] = served_providers(log)
            if not served_on_device(report["served_on"], args.provider):
                return report  # measuring a fallback costs device time and tells nothing
            for n, clients in enumerate(levels):
                report[f"clients_{clients}"] = asyncio.run(
                    _searches(url, asked[n * args.questions : (n + 1) * args.questions], clients)
                )
    return report


# --- the run --------------------------------------------------------------------------


def check(value: float, bound: float, at_least: bool = True) -> dict[str, Any]:
    return {
        "value": value,
        "bound": f"{'>=' if at_least else '<='} {bound}",
        "ok": value >= bound if at_least else value <= bound,
    }


def graphs(
    args: argparse.Namespace, model_dir: Path, probe: Batch, profiles: Path
) -> tuple[dict[str, OnnxSession], dict[str, Any]]:
    """The graphs that load on the device, as answerbox loads them, and where each ran."""
    manifest = ModelManifest.load(model_dir)
    sessions: dict[str, OnnxSession] = {}
    where: dict[str, Any] = {}
    for variant in args.graphs:
        path = manifest.model_path(model_dir, variant)
        try:
            session = OnnxSession(path, providers=[args.provider])
            where[variant] = {"package_provider": session.provider, **placement(path, args.provider, probe, profiles)}
        except Exception as error:  # e.g. a kernel the provider lacks: reported, judged by the caller
            where[variant] = {"error": str(error)[:500], "on_device": False}
            continue
        where[variant]["on_device"] = on_device(where[variant], args.provider, args.min_device_share)
        if where[variant]["on_device"]:
            sessions[f"{args.device}/{variant}"] = session
    return sessions, where


def agreement_step(
    args: argparse.Namespace, model_dir: Path, variants: Sequence[str], items: Sequence[Item]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each variant's agreement with the CPU fp32 graph, and the issue's checks on fp16 and fp32."""
    reference, seconds = readings(settings(model_dir, "fp32", CPU), items)
    report: dict[str, Any] = {"reference": {"graph": "fp32", "provider": CPU, "seconds": round(seconds, 1)}}
    checks: dict[str, Any] = {}
    for variant in variants:
        candidate, seconds = readings(settings(model_dir, variant, args.provider), items)
        report[variant] = {**agreement(reference, candidate), "seconds": round(seconds, 1)}
        if variant != "int8":  # int8 is not meant to match fp32 this closely (onnx_models/README)
            checks[f"{variant}_same_best_span"] = check(report[variant]["same_best_span"], SPAN_AGREEMENT)
            checks[f"{variant}_same_top10_order"] = check(report[variant]["same_top10_order"], ORDER_AGREEMENT)
    return report, checks


def run(args: argparse.Namespace, work: Path) -> tuple[dict[str, Any], int]:
    """The report, and the exit status: 1 when the device was asked for and something fell back, 2 when a check
    failed."""
    ort = import_onnxruntime()
    data, paragraphs = load_data(args.squad)
    report: dict[str, Any] = {
        "device": args.device,
        "onnxruntime": {
            "version": ort.__version__,
            "file": ort.__file__,
            "available_providers": ort.get_available_providers(),
        },
        "data": {"source": data, "paragraphs": len(paragraphs), "questions": sum(len(p.questions) for p in paragraphs)},
        "sizes": {k: getattr(args, k) for k in ("pairs", "batches", "seconds", "questions", "clients")},
        "step_s": {},
    }
    cuda = args.device == "cuda"  # on the CPU nothing can fall back, and the bounds are the GPU's

    def lap(step: str, started: float) -> None:
        report["step_s"][step] = round(time.perf_counter() - started, 1)

    started = time.perf_counter()
    model_dir = model_dir_with_fp16(args.model_dir, work / "models")
    items = agreement_items(paragraphs, args.pairs, args.seed)
    windows = first_windows(model_dir, [(i.paragraph, i.question) for i in items])
    (work / "profiles").mkdir()
    sessions, report["graphs"] = graphs(args, model_dir, pad_windows(windows[:16]), work / "profiles")
    report["fell_back"] = [v for v in ("fp16", "fp32") if v in args.graphs and not report["graphs"][v]["on_device"]]
    lap("prepare", started)
    if cuda and report["fell_back"]:
        return report, 1  # what follows would time the CPU: not worth the device's minutes

    started = time.perf_counter()
    report["agreement"], checks = agreement_step(args, model_dir, [name.split("/")[1] for name in sessions], items)
    lap("agreement", started)

    started = time.perf_counter()
    timed = {
        **sessions,
        "cpu/int8": OnnxSession(ModelManifest.load(model_dir).model_path(model_dir, "int8"), providers=[CPU]),
    }
    report["pairs_per_s"] = throughput(timed, args.device, windows, args.batches, args.seconds)
    if cuda and "64" in report["pairs_per_s"]["cpu/int8"]:
        best = max(v["64"] for k, v in report["pairs_per_s"].items() if k.startswith("cuda/"))
        checks["gpu_over_cpu_int8_at_64"] = check(
            round(best / report["pairs_per_s"]["cpu/int8"]["64"], 1), GPU_OVER_CPU_INT8_AT_64
        )
    lap("throughput", started)

    started = time.perf_counter()
    report["answerbox"] = end_to_end(args, model_dir, paragraphs, work)
    lap("answerbox", started)
    if not served_on_device(report["answerbox"]["served_on"], args.provider):
        report["fell_back"].append(f"answerbox serve ({args.serve_variant})")
    elif cuda and 1 in args.clients:
        checks["answerbox_p50_ms_1_client"] = check(
            report["answerbox"]["clients_1"]["p50_ms"], GPU_P50_MS, at_least=False
        )

    report["checks"] = checks
    report["failed"] = [name for name, c in checks.items() if not c["ok"]]
    report["judged"] = cuda
    if not cuda:
        return report, 0
    return report, 1 if report["fell_back"] else 2 if report["failed"] else 0


def _sizes(text: str) -> list[int]:
    return [int(v) for v in text.split(",")]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=sorted(PROVIDERS), required=True)
    parser.add_argument("--model-dir", type=Path, default=ModelSettings().dir)
    parser.add_argument(
        "--squad",
        type=Path,
        help="bigbench-1.0.0.tar.gz or a folder holding squaddev_v1.1.json.gz (default: the data cache's tarball)",
    )
    parser.add_argument(
        "--graphs", type=lambda s: s.split(","), default=["fp16", "fp32", "int8"], help="graphs to load on the device"
    )
    parser.add_argument("--pairs", type=int, default=1000, help="agreement questions (also the windows timed)")
    parser.add_argument("--batches", type=_sizes, default=[1, 16, 64, 256])
    parser.add_argument(
        "--seconds", type=float, default=2.0, help="time per pairs/s reading (and as long again to warm up)"
    )
    parser.add_argument("--questions", type=int, default=300, help="searches per client level")
    parser.add_argument("--clients", type=_sizes, default=[1, 16, 64])
    parser.add_argument(
        "--serve-variant",
        choices=("int8", "fp16", "fp32"),
        help="the graph answerbox serves (default: fp16 on cuda, int8 on cpu)",
    )
    parser.add_argument("--serve-max-batch", type=int, help="answerbox's models.max_batch (default: answerbox's)")
    parser.add_argument("--serve-max-wait-ms", type=float, help="answerbox's models.max_wait_ms (default: answerbox's)")
    parser.add_argument(
        "--min-device-share",
        type=float,
        default=0.9,
        help="profiled node time on the device's provider for a graph to count as on it",
    )
    parser.add_argument("--seed", type=int, default=43)
    parser.add_argument("--out", type=Path, help="also write the JSON report here")
    args = parser.parse_args(argv)
    args.provider = PROVIDERS[args.device]
    args.serve_variant = args.serve_variant or ("fp16" if args.device == "cuda" else "int8")
    work = Path(tempfile.mkdtemp(prefix="gpu_serving-"))
    try:
        report, status = run(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
