"""Where an extractive answer's time goes, and what it costs against an earlier commit, in one run.

    PYTHONPATH=plugin:. python -m bench.answer_cost [--questions 300] [--baseline-rev 44e4c7a]
        [--clients 1 4 16 32] [--load-questions 120] [--models DIR] [--set squad|sample]

``--models DIR`` serves this tree with another model (a student, say) against the baseline
with its own.

``--set sample`` (taken by itself when SQuAD v1.1 dev is not found) measures the same path on the
shipped sample's paragraphs and questions (``deploy/embedded``, 346 SQuAD-dev paragraphs): its
numbers are not comparable with a SQuAD-dev run's.

osmem-server holds every SQuAD v1.1 dev paragraph (or the sample's), for both trees; each question
goes through the extractive pipeline a new user writes: ``retrieval_evaluator`` (top 10, rerank)
then ``cited_answer`` (size 5, no LLM).

1. **Stages** (this tree, in process, one search at a time): each wrapped step's share of the
   answer's time: the search (OpenSearch's own ``took`` as answerbox timed it), tokenising and
   building windows, the encoder's forward pass (with the batch shapes it ran), decoding spans,
   the calibrator and rendering the response; what is left is answerbox's own code between them.
2. **Latency**: p50/p90 of the same questions through ``answerbox serve`` from this tree and from
   ``--baseline-rev`` (a temporary worktree), alternating which goes first.
3. **Throughput**: answers/s with 1, 4, 16 and 32 clients each sending questions back to back,
   both servers in turn, and the ratio this tree / baseline; each level asks new questions.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
from answerbox import app as answerbox_app
from answerbox.core.config import Settings
from answerbox.models import confidence, reader, session, windows
from answerbox.pipeline.run import engine
from opensearchpy import OpenSearch
from osmem_server import OsmemServer
from starlette.responses import JSONResponse

from bench.harness import (
    REPO_ROOT,
    answerbox_serve,
    checkout,
    dev_paragraphs,
    index_paragraphs,
    quantile,
    sample_corpus,
    serve,
)
from onnx_models.data.squad import Paragraph, sample_questions

PIPELINE = {
    "response_processors": [
        {"retrieval_evaluator": {"text_fields": ["text"], "top_n": 10, "rerank": True}},
        {"cited_answer": {"size": 5, "mode": "extractive"}},
    ]
}
INDEX = "squad"


def _body(question: str) -> dict[str, Any]:
    return {"query": {"match": {"text": question}}, "size": 10, "search_pipeline": PIPELINE}


# --- 1. stages ------------------------------------------------------------------------------


class _Stages:
    """Seconds per stage and the encoder's batch shapes, summed over the wrapped calls (which run on
    the loop, in threads and on the batcher's worker: one search at a time keeps them apart)."""

    def __init__(self) -> None:
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.batches: Counter[tuple[int, int]] = Counter()
        self._lock = threading.Lock()

    def add(self, stage: str, seconds: float) -> None:
        with self._lock:
            self.seconds[stage] += seconds

    def timed(self, stage: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.add(stage, time.perf_counter() - started)

        return wrapper


@contextmanager
def _instrumented(stages: _Stages) -> Iterator[None]:
    """The steps wrapped where the package looks them up, and put back after."""
    forward = session.OnnxSession.run

    def run(self: session.OnnxSession, inputs: dict[str, Any]) -> Any:
        stages.batches[tuple(inputs["input_ids"].shape)] += 1
        return forward(self, inputs)

    patches: list[tuple[Any, str, Any]] = [
        (windows.WindowTokenizer, "windows", stages.timed("tokenise + windows", windows.WindowTokenizer.windows)),
        (windows, "_to_window", stages.timed("windows built", windows._to_window)),
        (session.OnnxSession, "run", stages.timed("forward pass", run)),
        (reader, "best_span", stages.timed("decode spans", reader.best_span)),
        (confidence.AnswerCalibrator, "confidence", stages.timed("calibrator", confidence.AnswerCalibrator.confidence)),
        (engine.SearchRun, "_rendered", stages.timed("render", engine.SearchRun._rendered)),
        (JSONResponse, "render", stages.timed("render", JSONResponse.render)),
    ]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    for owner, name, wrapped in patches:
        setattr(owner, name, wrapped)
    try:
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


def profile(osmem_url: str, questions: Sequence[str]) -> None:
    stages = _Stages()
    total = 0.0
    settings = Settings.load(opensearch={"url": osmem_url})
    with serve(answerbox_app.create_app(settings)) as url, httpx.Client(base_url=url, timeout=300) as http:
        http.post(f"/{INDEX}/_search", json=_body(questions[0])).raise_for_status()  # loads the model
        with _instrumented(stages):
            for question in questions:
                started = time.perf_counter()
                response = http.post(f"/{INDEX}/_search", json=_body(question))
                total += time.perf_counter() - started
                response.raise_for_status()
                stages.add("search", response.json()["ext"]["answerbox"]["timings_ms"]["search"] / 1000)
    # Tokenising is the wrapped windows() less the windows it built inside it.
    seconds = dict(stages.seconds)
    seconds["tokenise"] = seconds.pop("tokenise + windows", 0.0) - seconds.get("windows built", 0.0)
    seconds["other (answerbox, HTTP)"] = total - sum(seconds.values())
    n = len(questions)
    print(f"stages, this tree, {n} questions one at a time: {total / n * 1000:.1f} ms an answer on average")
    for stage, spent in sorted(seconds.items(), key=lambda item: -item[1]):
        print(f"  {stage:<24} {spent / n * 1000:7.2f} ms  {spent / total:6.1%}")
    runs = sum(stages.batches.values())
    rows = sum(b * count for (b, _), count in stages.batches.items())
    padded = sum(b * length * count for (b, length), count in stages.batches.items())
    print(
        f"  encoder: {runs / n:.1f} runs an answer, {rows / n:.1f} windows, {padded / n:.0f} padded tokens; "
        f"commonest shapes (windows x tokens: runs) "
        + ", ".join(f"{b}x{length}: {count}" for (b, length), count in stages.batches.most_common(5))
    )


# --- 2 and 3. latency and throughput against a baseline -----------------------------------


def _warm_up(url: str) -> None:
    """The model loaded before anything is timed."""
    httpx.post(f"{url}/{INDEX}/_search", json=_body("warm up"), timeout=120).raise_for_status()


def latency(urls: dict[str, str], questions: Sequence[str]) -> None:
    millis: dict[str, list[float]] = {name: [] for name in urls}
    with httpx.Client(timeout=300) as http:
        for i, question in enumerate(questions):
            for name in list(urls)[:: 1 if i % 2 else -1]:
                started = time.perf_counter()
                http.post(f"{urls[name]}/{INDEX}/_search", json=_body(question)).raise_for_status()
                millis[name].append((time.perf_counter() - started) * 1000)
    print(f"latency, {len(questions)} questions one at a time, alternating")
    for name, values in millis.items():
        print(f"  {name:>10}  p50 {quantile(values, 0.5):7.1f} ms  p90 {quantile(values, 0.9):7.1f} ms")
    this, base = millis["this tree"], millis[list(urls)[1]]
    for q in (0.5, 0.9):
        print(f"  p{int(q * 100)} ratio this tree / baseline: {quantile(this, q) / quantile(base, q):.2f}")


async def _answers_per_s(url: str, questions: Sequence[str], clients: int) -> float:
    pending = iter(questions)
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=httpx.Limits(max_connections=clients)) as http:

        async def client() -> None:
            for question in pending:
                (await http.post(f"/{INDEX}/_search", json=_body(question))).raise_for_status()

        started = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        return len(questions) / (time.perf_counter() - started)


def throughput(urls: dict[str, str], questions: Sequence[str], clients: Sequence[int]) -> None:
    """Each level asks questions no earlier level or phase asked: a repeated one is the encoder's
    cache's (question, passage) hit, not an answer's work."""
    per_level = len(questions) // len(clients)
    print(f"saturated throughput, {per_level} new questions per server and level")
    for level, n in enumerate(clients):
        asked = questions[level * per_level : (level + 1) * per_level]
        rates = {name: asyncio.run(_answers_per_s(url, asked, n)) for name, url in urls.items()}
        this, base = rates["this tree"], rates[list(urls)[1]]
        shown = "  ".join(f"{name} {rate:6.2f}/s" for name, rate in rates.items())
        print(f"  {n:>2} clients  {shown}  ratio {this / base:.2f}")


def load_set(name: str) -> tuple[str, list[Paragraph]]:
    """The paragraphs ``--set`` names, and what they are: SQuAD v1.1 dev, else (when it is not
    found, or asked for) the shipped sample's."""
    if name == "squad":
        try:
            return "SQuAD v1.1 dev", dev_paragraphs()
        except FileNotFoundError as missing:
            print(f"no SQuAD v1.1 dev ({missing}): measuring on the shipped sample instead")
    return "the shipped sample (deploy/embedded; not comparable with SQuAD dev)", sample_corpus()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--load-questions", type=int, default=120, help="new questions per throughput level")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16, 32])
    parser.add_argument("--baseline-rev", default="44e4c7a")
    parser.add_argument("--seed", type=int, default=2025)
    parser.add_argument("--skip-stages", action="store_true")
    parser.add_argument("--models", type=Path, default=None, help="this tree serves the model in DIR")
    parser.add_argument(
        "--set", choices=["squad", "sample"], default="squad", help="SQuAD v1.1 dev, or the shipped sample"
    )
    args = parser.parse_args(argv)
    described, paragraphs = load_set(args.set)
    wanted = args.questions + args.load_questions * len(args.clients)
    sampled = [q.text for _, q in sample_questions(paragraphs, wanted, args.seed)]
    if len(sampled) < wanted:
        raise SystemExit(f"{described} has {len(sampled)} questions; this run asks {wanted}")
    print(f"{described}: {len(paragraphs)} paragraphs indexed, {len(sampled)} questions asked")
    questions, unseen = sampled[: args.questions], sampled[args.questions :]
    with ExitStack() as stack:
        osmem = stack.enter_context(OsmemServer.start(japanese=False))
        index_paragraphs(OpenSearch(hosts=[osmem.url], timeout=120), INDEX, paragraphs)
        if not args.skip_stages:
            profile(osmem.url, questions)
        tree = stack.enter_context(checkout(args.baseline_rev))
        urls = {
            "this tree": stack.enter_context(answerbox_serve(osmem.url, REPO_ROOT / "plugin", args.models)).url,
            args.baseline_rev: stack.enter_context(answerbox_serve(osmem.url, tree / "plugin")).url,
        }
        for url in urls.values():
            _warm_up(url)
        latency(urls, questions)
        throughput(urls, unseen, args.clients)


if __name__ == "__main__":
    main()
