"""The answer box page in headless Chromium: how soon a person sees the hits, the first
token and the checked answer, for questions of the sample corpus.

    python bench/ui_stream_latency.py --llm http://127.0.0.1:8081/v1 [--questions 5]
    python bench/ui_stream_latency.py --scripted [--questions 20]

Starts osmem-server with the sample corpus and answerbox (under uvicorn, in a thread),
registers deploy/ADMIN.md's pipelines, then asks each question through the page, one at
a time, and prints, per question and as p50/p90, the milliseconds from pressing Enter to
the hits list, the first token on screen, and the final state. ``--scripted`` answers
with a scripted LLM at once, so it measures answerbox, the ONNX models and the page alone.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any

import httpx
from osmem_server import OsmemServer
from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from answerbox.app import create_app
from answerbox.core.config import Settings
from answerbox.ops.embedded import SAMPLE_INDEX, load_sample_corpus

from bench.harness import ScriptedLLM, serve

# Debian's Chromium, headless, as the answer box page tests drive it.
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-quic",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
]
ADMIN_GUIDE = ROOT / "deploy" / "ADMIN.md"
_SHELL_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)
_CURL = re.compile(
    r"""curl -sS(?: -N)?(?: -X(?P<method>[A-Z]+))? "\$ANSWERBOX(?P<path>[^"]+)"""
    r""""(?: -H '[^']*')?(?: -d '(?P<body>[^']*)')?"""
)
# The first snippet line's first sentence, or the whole line (a title strip has no stop).
_FIRST_SENTENCE = re.compile(r"^snippet: (.+?)(?:[.!?](?=\s|$)|$)", re.MULTILINE)

# Presses Enter on the page's form and resolves with the times of the stream's events.
_ASK = """
async ({question, index, pipeline}) => {
  const box = document.querySelector("answer-box");
  const times = {};
  const started = performance.now();
  const mark = (name) => () => { if (!(name in times)) times[name] = performance.now() - started; };
  box.addEventListener("answerbox:hits", mark("hits"));
  box.addEventListener("answerbox:token", mark("first_token"));
  const finished = new Promise((resolve) => new MutationObserver(() => {
    if (["answered", "abstained", "searched", "error"].includes(box.getAttribute("state"))) resolve();
  }).observe(box, {attributes: true, attributeFilter: ["state"]}));
  document.getElementById("index").value = index;
  document.getElementById("pipeline").value = pipeline;
  document.getElementById("q").value = question;
  document.getElementById("search").requestSubmit();
  await finished;
  times.final = performance.now() - started;
  return {...times, state: box.getAttribute("state"), degraded: box.hasAttribute("degraded")};
}
"""


def _admin_puts() -> list[tuple[str, Any]]:
    """The PUT curls of deploy/ADMIN.md's shell blocks (its pipelines), in order, as (path, body)."""
    puts = []
    for block in _SHELL_BLOCK.findall(ADMIN_GUIDE.read_text()):
        for curl in _CURL.finditer(block):
            if curl["method"] == "PUT":
                puts.append((curl["path"], json.loads(curl["body"]) if curl["body"] else None))
    return puts


def _scripted_reply(messages: list[dict[str, str]]) -> str:
    """``--scripted``'s LLM, a model that read the evidence: a FreshPrompt prompt (it ends in
    ``answer:``) gets the first sentence of evidence block [1], cited; any other prompt
    (expansion, keyword rewrite) gets keywords."""
    prompt = messages[-1]["content"]
    if not prompt.rstrip().endswith("answer:"):
        return "Super Bowl 50, stadium, venue"
    # This question's evidence comes after the last "query:" (the demonstrations come first).
    first = _FIRST_SENTENCE.search(prompt.rsplit("\nquery: ", 1)[-1])
    return (f"{first.group(1)} [1]." if first else "The evidence does not say.").strip()


def _questions(n: int) -> list[str]:
    lines = (ROOT / "deploy" / "embedded" / "questions.jsonl").read_text().splitlines()
    # Every 7th question: spread over the corpus rather than the first article's.
    return [json.loads(line)["question"] for line in lines[::7][:n]]


def _p(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] if len(values) > 1 else values[0]


def _summary(name: str, values: list[float]) -> str:
    if not values:
        return f"{name:>12}: none"
    return f"{name:>12}: p50 {_p(values, 50):8.0f} ms   p90 {_p(values, 90):8.0f} ms   (n={len(values)})"


def _ask_all(url: str, questions: list[str], pipeline: str) -> list[dict[str, Any]]:
    results = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
        page = browser.new_page()
        for question in questions:
            page.goto(f"{url}/_answerbox/ui/")
            result = page.evaluate(_ASK, {"question": question, "index": SAMPLE_INDEX, "pipeline": pipeline})
            results.append({"question": question, **result})
            first = f"{result['first_token']:8.0f}" if "first_token" in result else "       —"
            hits = f"{result['hits']:8.0f}" if "hits" in result else "       —"
            print(
                f"{hits} {first} {result['final']:8.0f}  {result['state']:<9} "
                f"{'degraded' if result['degraded'] else '':<8} {question}"
            )
        browser.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--llm", help="an OpenAI-compatible base URL, e.g. http://127.0.0.1:8081/v1")
    source.add_argument("--scripted", action="store_true", help="a scripted LLM that answers at once")
    parser.add_argument("--questions", type=int, default=5)
    parser.add_argument("--pipeline", default="answers", help="one of deploy/ADMIN.md's pipelines")
    parser.add_argument("--llm-timeout", type=float, default=120.0)
    args = parser.parse_args()

    scripted = ScriptedLLM(_scripted_reply)
    with OsmemServer.start(japanese=False) as osmem, serve(scripted.app()) as scripted_url:
        load_sample_corpus(osmem.url)
        llm_url = args.llm or f"{scripted_url}/v1"
        settings = Settings.load(
            opensearch={"url": osmem.url},
            llm={"base_url": llm_url, "timeout_s": args.llm_timeout},
            limits={"processor_timeout_s": args.llm_timeout + 60, "pipeline_budget_s": args.llm_timeout + 60},
        )
        with serve(create_app(settings)) as url:
            for path, body in _admin_puts():
                httpx.put(f"{url}{path}", json=body, timeout=30).raise_for_status()
            print(f"LLM: {llm_url}   pipeline: {args.pipeline}   questions: {args.questions}")
            print(f"{'hits ms':>8} {'token ms':>8} {'final ms':>8}  state")
            results = _ask_all(url, _questions(args.questions), args.pipeline)
    print()
    print(_summary("hits", [r["hits"] for r in results if "hits" in r]))
    print(_summary("first token", [r["first_token"] for r in results if "first_token" in r]))
    print(_summary("final", [r["final"] for r in results]))
    states = {state: sum(r["state"] == state for r in results) for state in sorted({r["state"] for r in results})}
    print(f"{'states':>12}: {states}, degraded: {sum(r['degraded'] for r in results)}")


if __name__ == "__main__":
    main()
