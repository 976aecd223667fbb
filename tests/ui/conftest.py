"""A headless Chromium (Debian's, driven by Playwright) for the answer box page tests, and
osmem-server holding the embedded default's sample corpus."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from answerbox.ops.embedded import load_sample_corpus
from osmem_server import OsmemServer

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

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


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="the playwright package (test extra) drives the browser"
    )
    if not CHROMIUM.is_file():
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh page; a script error on it fails the test."""
    context = browser.new_context(viewport={"width": 1000, "height": 700})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    context.close()
    assert errors == [], f"script errors on the page: {errors}"


@pytest.fixture(scope="session")
def sample_corpus_server() -> Iterator[OsmemServer]:
    """The sample corpus, loaded once: bulk-loading it takes seconds, cloning it almost none."""
    with OsmemServer.start(japanese=False) as server:
        load_sample_corpus(server.url)
        yield server
    # osmem-server's close() stops the process but leaves its stdout pipe open.
    if server.process.stdout is not None:
        server.process.stdout.close()


@pytest.fixture
def osmem_url(sample_corpus_server: OsmemServer) -> Iterator[str]:
    """A clone of the sample corpus for one test (replaces the empty clone of the osmem plugin)."""
    clone = sample_corpus_server.clone()
    yield clone.url
    clone.close()
