"""What the benches share: servers on loopback ports, a scripted LLM, quantiles, SQuAD v1.1 dev
as the benches index it (and the embedded default's sample of it), and the interleaved timing of
model graphs.

Benches import this module, the package and ``onnx_models``; none imports ``tests/``.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from answerbox.core.shipped import shipped
from answerbox.models.manifest import ModelManifest
from answerbox.models.session import CPU, OnnxSession
from answerbox.models.windows import Window, WindowTokenizer, load_tokenizer, pad_windows
from answerbox.ops.embedded import wait_until_up
from answerbox.server import free_port, serve_in_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from onnx_models.data.squad import DEV_FILE, Paragraph, Question, load_squad

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

__all__ = [
    "BENCH_DIR",
    "REPO_ROOT",
    "SQUAD_INDEX",
    "Batch",
    "ScriptedLLM",
    "Served",
    "Timed",
    "answerbox_serve",
    "checkout",
    "dev_paragraphs",
    "doc_id",
    "first_windows",
    "floor_serve",
    "free_port",
    "index_paragraphs",
    "interleaved_pairs_per_s",
    "match_body",
    "median_ratio",
    "onnx_runner",
    "quantile",
    "readme_pipeline",
    "sample_corpus",
    "serve",
    "torch_runner",
]

# The repository the benches run from (its README, git history).
REPO_ROOT = Path(__file__).resolve().parents[1]
# Where the benches keep their data and the rows of a run, outside the repository.
BENCH_DIR = Path(os.environ.get("ANSWERBOX_BENCH_DIR", "/root/.cache/answerbox/bench"))


# --- servers ----------------------------------------------------------------------------


serve = serve_in_thread  # the ASGI app on a free loopback port, in a thread; yields its URL


@contextmanager
def checkout(revision: str) -> Iterator[Path]:
    """This repository at ``revision``, in a temporary git worktree removed afterwards: an earlier
    answerbox runs from it as ``PYTHONPATH=<it>/plugin``, beside this one, in the same run."""
    with tempfile.TemporaryDirectory(prefix="answerbox-") as parent:
        tree = Path(parent) / revision
        git = ["git", "-C", str(REPO_ROOT), "worktree"]
        subprocess.run([*git, "add", "--detach", "--quiet", str(tree), revision], check=True)
        try:
            yield tree
        finally:
            subprocess.run([*git, "remove", "--force", str(tree)], check=False)


@dataclass(frozen=True)
class Served:
    """An ``answerbox serve`` process: its URL, and the CPU time it has used so far."""

    url: str
    pid: int

    def cpu_s(self) -> float:
        """User and system CPU seconds of the server's process (``/proc``: Linux)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def answerbox_serve(opensearch_url: str, plugin: Path, models: Path | None = None) -> Iterator[Served]:
    """``answerbox serve`` from ``plugin`` (a checkout's package folder) in front of ``opensearch_url``,
    in its own process (so the load generator does not share its interpreter), serving the models
    in ``models`` (default: its own)."""
    port = free_port()
    env = {
        **os.environ,
        "ANSWERBOX_OPENSEARCH__URL": opensearch_url,
        "ANSWERBOX_PORT": str(port),
        "PYTHONPATH": str(plugin),
    }
    if models is not None:
        env["ANSWERBOX_MODELS__DIR"] = str(models)
    # A baseline checkout from before the package's ground floor was grouped has its command at the top.
    cli = "answerbox.ops.cli" if (plugin / "answerbox" / "ops").is_dir() else "answerbox.cli"
    with _serve_process([sys.executable, "-m", cli, "serve", "--log-level", "warning"], env, port) as served:
        yield served


@contextmanager
def floor_serve(opensearch_url: str) -> Iterator[Served]:
    """``bench/floor_proxy.py`` (this checkout's client, no answerbox layers) in its own process."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT / "plugin"), str(REPO_ROOT)])}
    with _serve_process([sys.executable, "-m", "bench.floor_proxy", opensearch_url, str(port)], env, port) as served:
        yield served


@contextmanager
def _serve_process(command: list[str], env: dict[str, str], port: int) -> Iterator[Served]:
    server = subprocess.Popen(command, env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_up(f"{url}/", server, 60)
        yield Served(url, server.pid)
    finally:
        server.terminate()
        server.wait(10)


# --- a scripted LLM ---------------------------------------------------------------------


@dataclass
class ScriptedLLM:
    """An OpenAI-compatible chat-completions endpoint whose every reply is ``reply(messages)``,
    streamed when the request asks. It takes no ``response_format`` (400, as vLLM answers a
    form it does not know), so answerbox's structured-output probe finds none and the LLM's
    text is free text, as with the real local LLM."""

    reply: Callable[[list[dict[str, str]]], str]

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/chat/completions", self._chat, methods=["POST"])])

    async def _chat(self, request: Request) -> Response:
        payload = await request.json()
        if (form := payload.get("response_format")) is not None:
            error = {
                "message": f"response_format {form.get('type')!r} is not supported",
                "type": "invalid_request_error",
            }
            return JSONResponse({"error": error}, status_code=400)
        text = self.reply(payload["messages"])
        if payload.get("stream"):
            return StreamingResponse(self._events(text), media_type="text/event-stream")
        message = {"role": "assistant", "content": text}
        words = len(text.split())
        return JSONResponse(
            {
                **self._envelope("chat.completion", payload.get("model", "scripted")),
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": words, "total_tokens": 10 + words},
            }
        )

    @staticmethod
    def _envelope(kind: str, model: str) -> dict[str, Any]:
        return {"id": "chatcmpl-scripted", "object": kind, "created": int(time.time()), "model": model}

    async def _events(self, text: str) -> AsyncIterator[str]:
        """One chunk a word (each followed by a space), a last chunk that stops, then [DONE]."""
        for word in text.split(" "):
            delta = {"index": 0, "delta": {"content": word + " "}, "finish_reason": None}
            yield f"data: {json.dumps({**self._envelope('chat.completion.chunk', 'scripted'), 'choices': [delta]})}\n\n"
        last = {"index": 0, "delta": {}, "finish_reason": "stop"}
        yield f"data: {json.dumps({**self._envelope('chat.completion.chunk', 'scripted'), 'choices': [last]})}\n\n"
        yield "data: [DONE]\n\n"


# --- statistics -------------------------------------------------------------------------


def quantile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (``q`` in [0, 1]); NaN for no values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


# --- SQuAD v1.1 dev ---------------------------------------------------------------------

# The index the answer benches search: every dev paragraph, ``_id`` its paragraph id.
SQUAD_INDEX = "squad"


def sample_corpus() -> list[Paragraph]:
    """The embedded default's sample (``deploy/embedded``: whole articles of SQuAD dev, so for
    reporting only) as SQuAD paragraphs; an answer's offset is its first occurrence (-1: none)."""
    sample = shipped("sample")
    asked: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    for line in (sample / "questions.jsonl").read_text().splitlines():
        row = json.loads(line)
        asked.setdefault(row["doc"], []).append((row["question"], tuple(row["answers"])))
    paragraphs = []
    for line in (sample / "corpus.jsonl").read_text().splitlines():
        doc = json.loads(line)
        questions = tuple(
            Question(f"{doc['_id']}/{n}", text, answers, tuple(doc["text"].find(a) for a in answers))
            for n, (text, answers) in enumerate(asked.get(doc["_id"], []))
        )
        paragraphs.append(Paragraph(doc["_id"], doc["title"], doc["text"], questions))
    return paragraphs


def dev_paragraphs() -> list[Paragraph]:
    """The dev paragraphs, read from the tarball once and kept in ``BENCH_DIR``."""
    cached = BENCH_DIR / "squaddev_paragraphs.pickle"
    if cached.exists():
        try:
            paragraphs: list[Paragraph] = pickle.loads(cached.read_bytes())
            return paragraphs
        except (ModuleNotFoundError, AttributeError, pickle.UnpicklingError):
            pass  # written by a tree whose Paragraph lived elsewhere: read the tarball again
    paragraphs = load_squad([DEV_FILE])
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_bytes(pickle.dumps(paragraphs))
    return paragraphs


def doc_id(paragraph: Paragraph) -> str:
    """A paragraph's ``_id`` in ``index_paragraphs``'s indices."""
    return paragraph.id.replace("/", ":")


def index_paragraphs(client: OpenSearch, index: str, paragraphs: Sequence[Paragraph]) -> None:
    """``index`` created with every paragraph's ``text``, ``_id`` = ``doc_id(paragraph)``."""
    client.indices.create(index=index, body={"mappings": {"properties": {"text": {"type": "text"}}}})
    for start in range(0, len(paragraphs), 500):
        lines: list[dict[str, Any]] = []
        for p in paragraphs[start : start + 500]:
            lines += [{"index": {"_index": index, "_id": doc_id(p)}}, {"text": p.context}]
        client.bulk(body=lines)
    client.indices.refresh(index=index)


def readme_pipeline() -> dict[str, Any]:
    """The admin pipeline the README registers, read from its curl so a bench runs what users copy."""
    curl = re.search(r"_search/pipeline/answers -H '[^']*' -d '([^']*)'", (REPO_ROOT / "README.md").read_text())
    if curl is None:
        raise SystemExit("README.md registers no pipeline 'answers'")
    return dict(json.loads(curl[1]))


def match_body(question: str) -> dict[str, Any]:
    """The search the answer benches send: BM25 on ``text``, the top 10."""
    return {"query": {"match": {"text": question}}, "size": 10}


# --- model graphs, timed ----------------------------------------------------------------

Batch = tuple[np.ndarray, np.ndarray, np.ndarray]


def first_windows(model_dir: Path, questions: Sequence[tuple[Paragraph, Question]]) -> list[Window]:
    """The first window of each question with its gold paragraph, as ``model_dir``'s model reads it."""
    manifest = ModelManifest.load(model_dir)
    tokenizer = WindowTokenizer(
        load_tokenizer(model_dir / manifest.tokenizer), max_length=manifest.max_length, stride=manifest.stride
    )
    return [tokenizer.windows(q.text, [p.context])[0] for p, q in questions]


@dataclass(frozen=True, slots=True)
class Timed:
    """One configuration: an engine fed the windows in batches of ``batch``, padded to ``pad_to``."""

    run: Callable[[Batch], object]
    batch: int
    pad_to: int | None = None


def interleaved_pairs_per_s(
    configs: dict[str, Timed], windows: Sequence[Window], rounds: int
) -> dict[str, list[float]]:
    """pairs/s of every configuration in each of ``rounds`` rounds, the configurations taking turns."""
    fed = {
        name: [pad_windows(windows[i : i + c.batch], c.pad_to) for i in range(0, len(windows), c.batch)]
        for name, c in configs.items()
    }
    for name, c in configs.items():
        c.run(fed[name][0])  # warm-up: first-run allocations and graph setup
    out: dict[str, list[float]] = {name: [] for name in configs}
    for _ in range(rounds):
        for name, c in configs.items():
            started = time.perf_counter()
            for b in fed[name]:
                c.run(b)
            out[name].append(len(windows) / (time.perf_counter() - started))
    return out


def median_ratio(numerator: Sequence[float], denominator: Sequence[float]) -> float:
    return round(statistics.median(a / b for a, b in zip(numerator, denominator, strict=True)), 2)


def onnx_runner(path: Path, threads: int) -> Callable[[Batch], object]:
    session = OnnxSession(path, providers=[CPU], intra_op_threads=threads)
    return lambda b: session.run({"input_ids": b[0], "attention_mask": b[1], "token_type_ids": b[2]})


def torch_runner(checkpoint: Path, threads: int) -> Callable[[Batch], object] | None:
    if not (checkpoint / "model.safetensors").exists():
        return None
    import torch

    from onnx_models.train.modeling import ReaderEvaluatorModel

    if threads:
        torch.set_num_threads(threads)
    model = ReaderEvaluatorModel.load(checkpoint)

    def run(b: Batch) -> object:
        with torch.inference_mode():
            return model(*(torch.from_numpy(a) for a in b))

    return run
