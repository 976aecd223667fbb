"""OpenSearch's score contract through the embedded default: for questions of its sample (SQuAD dev
articles), each answer's ``_score`` must not increase down the hits and ``max_score`` must be the
first hit's, on ``_search``, an ``_msearch`` line and the stream's ``hits`` event.

osmem-server with the sample corpus (index ``squad``, pipeline ``answerbox-default`` its default, as
``answerbox`` with no arguments sets them up), answerbox in process, and a scripted LLM in place of
SmolLM2 (the LLM writes answers, it moves no hit). Prints the responses checked and those that break
the contract, with the first of them; exits 1 when any does.

    PYTHONPATH=plugin:. python -m bench.score_order --questions 30
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from contextlib import ExitStack
from itertools import pairwise
from typing import Any

import httpx
from answerbox.app import create_app
from answerbox.core.config import Settings
from answerbox.ops.embedded import SAMPLE_INDEX, SAMPLE_PIPELINE, SAMPLE_PIPELINE_ID, load_sample_corpus
from osmem_server import OsmemServer

from bench.harness import ScriptedLLM, sample_corpus, serve


def contract_broken(hits: dict[str, Any]) -> str | None:
    """What breaks OpenSearch's contract in a response's ``hits``, or None."""
    scores = [hit.get("_score") for hit in hits.get("hits", [])]
    if not scores:
        return None if hits.get("max_score") is None else f"no hits, max_score {hits.get('max_score')}"
    if any(not isinstance(score, int | float) for score in scores):
        return f"a hit without a score: {scores}"
    if any(a < b for a, b in pairwise(scores)):
        return f"_score rises: {scores}"
    if hits.get("max_score") != scores[0]:
        return f"max_score {hits.get('max_score')} is not the first _score {scores[0]}"
    return None


def _stream_hits(client: httpx.Client, url: str, body: dict[str, Any]) -> dict[str, Any]:
    """The stream's ``hits`` event's hits."""
    name = ""
    with client.stream("POST", f"{url}/{SAMPLE_INDEX}/_answerbox/stream", json=body) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: ") and name == "hits":
                ranked: dict[str, Any] = json.loads(line.removeprefix("data: "))["hits"]
                return ranked
    raise RuntimeError("the stream sent no hits event")


def _answers(client: httpx.Client, url: str, question: str) -> dict[str, dict[str, Any]]:
    """The question's hits as each way of asking answers them (the index's default pipeline runs)."""
    body = {"query": {"match": {"text": question}}}
    searched = client.post(f"{url}/{SAMPLE_INDEX}/_search", json=body)
    searched.raise_for_status()
    lines = "".join(json.dumps(line) + "\n" for line in ({"index": SAMPLE_INDEX}, body))
    multi = client.post(f"{url}/_msearch", content=lines, headers={"content-type": "application/x-ndjson"})
    multi.raise_for_status()
    return {
        "_search": searched.json()["hits"],
        "_msearch": multi.json()["responses"][0]["hits"],
        "stream": _stream_hits(client, url, body),
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=30, help="the sample's first N questions")
    args = parser.parse_args(argv)
    questions = [q.text for p in sample_corpus() for q in p.questions][: args.questions]
    checked, broken = 0, []
    with ExitStack() as stack, httpx.Client(timeout=600) as client:
        osmem = stack.enter_context(OsmemServer.start(japanese=False))
        load_sample_corpus(osmem.url)
        llm = stack.enter_context(serve(ScriptedLLM(lambda messages: "I don't know.").app()))
        settings = Settings.load(opensearch={"url": osmem.url}, llm={"base_url": f"{llm}/v1", "model": "scripted"})
        url = stack.enter_context(serve(create_app(settings), settings=settings))
        client.put(f"{url}/_search/pipeline/{SAMPLE_PIPELINE_ID}", json=SAMPLE_PIPELINE).raise_for_status()
        default = {"index.search.default_pipeline": SAMPLE_PIPELINE_ID}
        client.put(f"{url}/{SAMPLE_INDEX}/_settings", json=default).raise_for_status()
        for question in questions:
            for way, hits in _answers(client, url, question).items():
                checked += 1
                if (why := contract_broken(hits)) is not None:
                    broken.append(f"{way} {question!r}: {why}")
    print(f"{len(questions)} questions, {checked} responses checked, {len(broken)} break the score contract")
    if broken:
        print(f"first: {broken[0]}")
        sys.exit(1)


if __name__ == "__main__":
    main()
