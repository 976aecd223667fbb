"""Shared fixtures: osmem-server (a real HTTP server speaking OpenSearch's API), answerbox
under real uvicorn in front of it, and a scripted OpenAI-compatible LLM.

Two layers, marked here by where a test lives: everything under ``tests/unit`` is ``unit``
(in-process, seconds in all), everything else ``integration``. ``pytest -m unit`` and
``pytest -m integration`` run one layer alone; plain ``pytest`` (what CI runs) runs both.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from answerbox.app import create_app
from answerbox.core.config import Settings
from answerbox.pipeline.catalogue.registry import ProcessorRegistry
from opensearchpy import OpenSearch
from osmem_server import OsmemServer

from tests.support.recording_proxy import RecordingProxy
from tests.support.scripted_llm import ScriptedLLM, is_probe
from tests.support.servers import serve

AnswerboxFactory = Callable[..., str]

# Fixtures several test modules share, each in its own module.
pytest_plugins = ["tests.support.books"]

UNIT_DIR = Path(__file__).parent / "unit"


def _in_unit_layer(path: Path) -> bool:
    return path.is_relative_to(UNIT_DIR)


@pytest.hookimpl(tryfirst=True)  # before -m deselects by these markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.unit if _in_unit_layer(item.path) else pytest.mark.integration)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """``-m unit`` alone never imports the other layer's modules (torch, the browser, ...):
    the layers are told apart by path, so none of their tests could be selected anyway."""
    if str(config.getoption("markexpr", "")).strip() != "unit":
        return None
    on_the_way = _in_unit_layer(collection_path) or UNIT_DIR.is_relative_to(collection_path)
    return None if on_the_way else True


@pytest.fixture(scope="session")
def osmem_server(osmem_server: OsmemServer) -> Iterator[OsmemServer]:
    """The osmem plugin's server; its close() leaves the process's stdout pipe open, which
    ``filterwarnings = error`` would report as an unclosed file at the end of the run."""
    yield osmem_server
    if osmem_server.process.stdout is not None:
        osmem_server.process.stdout.close()


@pytest.fixture
def opensearch(osmem_url: str) -> OpenSearch:
    """A direct client to the test cluster, for seeding and comparing."""
    return OpenSearch(hosts=[osmem_url])


@pytest.fixture
def make_answerbox(osmem_url: str) -> Iterator[AnswerboxFactory]:
    """Start answerbox in front of this test's cluster; keyword arguments override settings."""
    with ExitStack() as stack:

        def factory(registry: ProcessorRegistry | None = None, **overrides: Any) -> str:
            overrides.setdefault("opensearch", {}).setdefault("url", osmem_url)
            settings = Settings.load(**overrides)
            return stack.enter_context(serve(create_app(settings, registry), settings=settings))

        yield factory


RecordedFactory = Callable[..., tuple[RecordingProxy, str]]


@pytest.fixture
def recorded_answerbox(make_answerbox: AnswerboxFactory, osmem_url: str) -> Iterator[RecordedFactory]:
    """Start answerbox with a ``RecordingProxy`` between it and this test's cluster, which keeps
    every request that reached "OpenSearch"; keyword arguments override settings."""
    with ExitStack() as stack:

        def factory(**overrides: Any) -> tuple[RecordingProxy, str]:
            recorder = RecordingProxy(osmem_url)
            hop = stack.enter_context(serve(recorder.app()))
            opensearch = {**overrides.pop("opensearch", {}), "url": hop}
            return recorder, make_answerbox(opensearch=opensearch, **overrides)

        yield factory


@pytest.fixture
def answerbox(make_answerbox: AnswerboxFactory) -> str:
    return make_answerbox()


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=60) as http:
        yield http


@pytest.fixture
def real_llm() -> Iterator[tuple[RecordingProxy, str]]:
    """The real local LLM (deploy/local/test.sh starts it) behind a recorder, so a test sees its
    calls reach the server. Tests assert the protocol and the contract, never the wording:
    a greedy 135M model's words differ between CPUs."""
    url = os.environ.get("ANSWERBOX_TEST_LLM_URL") or pytest.skip("ANSWERBOX_TEST_LLM_URL is unset (test.sh sets it)")
    recorder = RecordingProxy(url.removesuffix("/v1"), timeout_s=300)
    with serve(recorder.app()) as proxy:
        yield recorder, f"{proxy}/v1"


def completions(recorder: RecordingProxy) -> list[dict[str, Any]]:
    """The chat-completion requests that reached the LLM, as sent, less the client's structured-output probes."""
    sent = [json.loads(r.body) for r in recorder.matching("/chat/completions") if r.method == "POST"]
    return [payload for payload in sent if not is_probe(payload)]


@pytest.fixture
def scripted_llm() -> Iterator[tuple[ScriptedLLM, str]]:
    llm = ScriptedLLM()
    with serve(llm.app()) as url:
        yield llm, f"{url}/v1"


def bulk_index(
    opensearch: OpenSearch, index: str, docs: list[dict[str, Any]], mappings: dict[str, Any] | None = None
) -> None:
    opensearch.indices.create(index=index, body={"mappings": mappings} if mappings else {})
    lines: list[dict[str, Any]] = []
    for i, doc in enumerate(docs):
        lines += [{"index": {"_index": index, "_id": str(doc.pop("_id", i))}}, doc]
    opensearch.bulk(body=lines, refresh=True)
