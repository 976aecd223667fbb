"""The answer box page in a real browser (headless Chromium) against the embedded default:
answerbox under uvicorn, its sample corpus in osmem-server, the pipelines of deploy/ADMIN.md,
and a scripted LLM."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import httpx
import pytest
from opensearchpy import OpenSearch
from osmem_server import OsmemServer

from tests.conftest import AnswerboxFactory, completions
from tests.deploy.admin_guide import admin_requests
from tests.support.recording_proxy import RecordingProxy
from tests.ui.embedded import MODEL_READY, QUESTION, SAMPLE_INDEX, Stack, embedded_stack

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

expect = pytest.importorskip(
    "playwright.sync_api", reason="the playwright package (test extra) drives the browser"
).expect

ANSWER_TIMEOUT_MS = 45_000
needs_model = pytest.mark.skipif(not MODEL_READY, reason="onnx_models/default is not exported yet")

# Records, at each sentence event, how much of the answer the page shows; at every event, all
# the answer's text on the page then; and the final report. The old "token" event is listened
# for too: a page that showed text as the LLM wrote it would be caught showing it.
RECORDER = """
window.seen = {sentences: [], hitsAtFirstSentence: null, answer: null};
document.addEventListener("answerbox:sentence", (event) => {
  const root = event.target.shadowRoot;
  if (window.seen.hitsAtFirstSentence === null) window.seen.hitsAtFirstSentence = root.querySelectorAll(".hit").length;
  window.seen.sentences.push(root.querySelector(".answer-text.streaming")?.textContent ?? null);
});
document.addEventListener("answerbox:answer", (event) => { window.seen.answer = event.detail; });
window.seen.events = [];
for (const name of ["search", "hits", "snippet", "token", "sentence", "answer", "done"]) {
  document.addEventListener(`answerbox:${name}`, (event) => {
    const root = event.target.shadowRoot;
    window.seen.events.push({
      name,
      hits: root.querySelectorAll(".hit").length,
      state: event.target.getAttribute("state"),
      shown: root.querySelector(".answer")?.textContent ?? "",
    });
  });
}
"""


def _register_pipelines(client: httpx.Client, url: str) -> None:
    """The admin's path: the guide's pipelines, and `answers` as the sample index's default."""
    for request in admin_requests():
        if request.method == "PUT":
            assert client.put(f"{url}{request.path}", json=request.body).status_code == 200


def _show_every_answer(client: httpx.Client, url: str) -> None:
    """`answers` with no confidence gate: the calibrator was fitted on SmolLM2's answers, not the
    scripted LLM's, and these tests are about how the page shows an answer (the gate's own are below)."""
    pipeline = client.get(f"{url}/_search/pipeline/answers").json()["answers"]
    for processor in pipeline["response_processors"]:
        processor.get("cited_answer", {})["min_confidence"] = 0
    assert client.put(f"{url}/_search/pipeline/answers", json=pipeline).status_code == 200


def _ask(page: Page, url: str, question: str, index: str = SAMPLE_INDEX, pipeline: str = "") -> Locator:
    """Open the page, choose the index (and pipeline: default, the index's), type the question, press Enter."""
    page.goto(f"{url}/_answerbox/ui")
    page.evaluate(RECORDER)
    page.fill("#index", index)
    page.fill("#pipeline", pipeline)
    page.locator("#q").press_sequentially(question)
    page.keyboard.press("Enter")
    return page.locator("answer-box")


def _seen(page: Page) -> dict[str, Any]:
    seen: dict[str, Any] = page.evaluate("window.seen")
    return seen


@pytest.fixture(scope="module")
def shared_stack(sample_corpus_server: OsmemServer) -> Iterator[Stack]:
    """One answerbox for the module, so its ONNX models load once, with the guide's pipelines."""
    clone = sample_corpus_server.clone()
    try:
        with embedded_stack(clone.url) as stack, httpx.Client(timeout=60) as client:
            _register_pipelines(client, stack.url)
            _show_every_answer(client, stack.url)
            yield stack
    finally:
        clone.close()


@pytest.fixture
def stack(shared_stack: Stack) -> Iterator[Stack]:
    """The module's stack; a test may script its LLM otherwise, and it is set back after."""
    yield shared_stack
    shared_stack.oracle.cite = True
    shared_stack.oracle.stray = ""
    shared_stack.llm.fail = False


def test_the_hits_show_before_the_evaluator_and_the_llm_have_answered(page: Page, stack: Stack) -> None:
    box = _ask(page, stack.url, QUESTION)
    expect(box).to_have_attribute("state", "answered", timeout=ANSWER_TIMEOUT_MS)
    events = _seen(page)["events"]
    names = [e["name"] for e in events]
    # OpenSearch's hits are on the page first, while the answer is still being written...
    assert names[:2] == ["search", "hits"]
    assert names[-2:] == ["answer", "done"]
    assert "sentence" in names
    assert "token" not in names
    assert events[0]["hits"] > 0
    assert events[0]["state"] == "answering"
    # ...and stay there, re-ranked, through the sentences, until the checked answer lands.
    assert all(e["hits"] > 0 for e in events)
    assert [e["state"] for e in events[:-2]] == ["answering"] * (len(events) - 2)
    assert events[-1]["state"] == "answered"


def test_typed_question_streams_in_and_its_citation_lands_on_the_highlighted_hit(page: Page, stack: Stack) -> None:
    box = _ask(page, stack.url, QUESTION)
    expect(box).to_have_attribute("state", "answered", timeout=ANSWER_TIMEOUT_MS)
    seen = _seen(page)
    # Hits first, then the answer a checked sentence at a time: one here, shown once checked.
    assert seen["hitsAtFirstSentence"] > 0
    written = stack.oracle.answers[-1]
    assert [s.strip() for s in seen["sentences"]] == [written.replace("[1]", "1")]
    [citation] = seen["answer"]["answer"]["citations"]
    # The [1] became a chip: its text is the marker's number.
    expect(box.locator(".answer-text")).to_have_text(written.replace("[1]", "1"))
    assert "index=squad" in page.url
    assert "q=Where" in page.url
    card = box.locator(f'.hit[data-id="{citation["_id"]}"]')
    # Scroll to the end of the page away from the cited hit, so the click has to bring it in.
    card.evaluate(
        "(hit) => window.scrollTo(0, hit.getBoundingClientRect().top + scrollY > document.body.scrollHeight "
        "/ 2 ? 0 : document.body.scrollHeight)"
    )
    expect(card).not_to_be_in_viewport()
    box.locator(".chip").click()
    expect(card).to_be_in_viewport()
    expect(card).to_have_attribute("aria-current", "true")
    expect(card.locator("mark.quote")).to_have_text(citation["quote"])
    assert written.startswith(citation["quote"].rstrip(".!?"))


@needs_model
def test_how_this_was_checked_shows_the_verdict_and_the_checked_citations(page: Page, stack: Stack) -> None:
    box = _ask(page, stack.url, QUESTION)
    expect(box).to_have_attribute("state", "answered", timeout=ANSWER_TIMEOUT_MS)
    report = _seen(page)["answer"]
    box.locator("details.check > summary").click()
    verdict = box.locator(".check-retrieval .verdict")
    expect(verdict).to_be_visible()
    expect(verdict).to_have_attribute("data-verdict", report["retrieval"]["verdict"])
    [citation] = report["citations"]
    row = box.locator(".check-citations tbody tr")
    expect(row).to_contain_text(citation["quote"])
    expect(row.locator("td").last).to_have_text(f"{citation['support']:.2f}")
    expect(box.locator(".check-query_expansion .expansion")).to_contain_text(stack.oracle.keywords)


@needs_model
def test_a_sentence_that_fails_its_check_is_never_on_the_page(page: Page, stack: Stack) -> None:
    stack.oracle.stray = "The game was also played on the Moon [9]."
    box = _ask(page, stack.url, QUESTION)
    expect(box).to_have_attribute("state", "answered", timeout=ANSWER_TIMEOUT_MS)
    events = _seen(page)["events"]
    names = [e["name"] for e in events]
    # Hits, the snippet, the checked sentences, then the checked answer: in that order.
    assert names[:2] == ["search", "hits"]
    assert names[-2:] == ["answer", "done"]
    middle = names[2:-2]
    assert middle[: middle.count("snippet")] == ["snippet"] * middle.count("snippet")
    assert set(middle) <= {"snippet", "sentence"}
    assert "sentence" in middle
    # The LLM wrote the Moon sentence; at no event was any of it on the page.
    assert "Moon" in stack.oracle.answers[-1]
    assert not any("Moon" in e["shown"] for e in events)
    expect(box.locator(".answer")).not_to_contain_text("Moon")


@needs_model
def test_how_this_was_checked_lists_the_sentence_whose_citation_was_removed(page: Page, stack: Stack) -> None:
    stack.oracle.stray = "The game was also played on the Moon [9]."
    box = _ask(page, stack.url, QUESTION)
    expect(box).to_have_attribute("state", "answered", timeout=ANSWER_TIMEOUT_MS)
    [flagged] = _seen(page)["answer"]["answer"]["flagged"]
    assert (flagged["marker"], flagged["reason"]) == (9, "no_evidence")
    box.locator("details.check > summary").click()
    row = box.locator('.check-flagged li[data-marker="9"]')
    expect(row).to_contain_text("played on the Moon")
    expect(row).to_contain_text("cites no evidence block")


def _put_answers(stack: Stack, name: str, **cited_answer: Any) -> str:
    pipeline = {
        "response_processors": [{"retrieval_evaluator": {"top_n": 10}}, {"cited_answer": {"size": 5, **cited_answer}}]
    }
    assert httpx.put(f"{stack.url}/_search/pipeline/{name}", json=pipeline).status_code == 200
    return name


def _percent(confidence: float) -> str:
    return f"confidence {math.floor(confidence * 100 + 0.5)}%"  # as the page rounds (Math.round)


def _above_the_hits(box: Locator, selector: str) -> bool:
    """Whether ``selector`` comes before the first hit in the box's shadow DOM."""
    script = (
        f"(box) => !!(box.shadowRoot.querySelector({selector!r})"
        ".compareDocumentPosition(box.shadowRoot.querySelector('.hit')) & 4)"
    )
    return bool(box.evaluate(script))


@needs_model
def test_an_unverified_sentence_the_pipeline_shows_is_marked_not_checked(page: Page, stack: Stack) -> None:
    """``cited_answer.unverified: show``: a sentence none of whose citations held up stays in the
    answer, set apart as not checked while it streams and once answered, and the check says so."""
    stack.oracle.stray = "The crowd sang loudly all night [1]."
    pipeline = _put_answers(stack, "shows", mode="generative", min_confidence=0, unverified="show")
    box = _ask(page, stack.url, QUESTION, pipeline=pipeline)
    expect(box).to_have_attribute("state", "answered", timeout=ANSWER_TIMEOUT_MS)
    [flagged] = _seen(page)["answer"]["answer"]["flagged"]
    assert (flagged["verdict"], flagged["shown"]) == ("unverified", True)
    unverified = box.locator('.answer-text .sentence[data-verdict="unverified"]')
    expect(unverified).to_have_text("The crowd sang loudly all night.")
    expect(unverified).to_have_attribute("title", "not checked")
    assert box.locator(".answer-text .chip").count() >= 1  # the checked sentence keeps its citation
    box.locator("details.check > summary").click()
    expect(box.locator('.check-flagged li[data-verdict="unverified"]')).to_contain_text("shown, not checked")


@needs_model
def test_an_answer_shows_its_confidence_and_the_snippet_comes_first(page: Page, stack: Stack) -> None:
    box = _ask(page, stack.url, QUESTION, pipeline=_put_answers(stack, "sure", mode="extractive", min_confidence=0))
    expect(box).to_have_attribute("state", "answered", timeout=ANSWER_TIMEOUT_MS)
    seen = _seen(page)
    assert [e["name"] for e in seen["events"]] == ["search", "hits", "snippet", "answer", "done"]
    assert [e["state"] for e in seen["events"]] == ["answering", "answering", "answering", "answered", "answered"]
    answer = seen["answer"]["answer"]
    expect(box.locator(".answer")).to_have_attribute("data-answer", "answer")
    expect(box.locator(".answer-text")).to_contain_text(answer["text"])
    expect(box.locator(".confidence")).to_have_text(f"extractive answer · {_percent(answer['confidence'])}")
    expect(box.locator(".possible-label")).to_have_count(0)


@needs_model
def test_a_low_confidence_answer_is_a_muted_possible_answer(page: Page, stack: Stack) -> None:
    box = _ask(page, stack.url, QUESTION, pipeline=_put_answers(stack, "unsure", mode="extractive", min_confidence=1))
    expect(box).to_have_attribute("state", "possible", timeout=ANSWER_TIMEOUT_MS)
    seen = _seen(page)
    assert [e["name"] for e in seen["events"]] == ["search", "hits", "snippet", "answer", "done"]
    answer = seen["answer"]["answer"]
    candidate = answer["candidate"]
    assert answer["abstained"]
    assert answer["reason"] == "low_confidence"
    assert candidate["text"]
    expect(box.locator(".answer")).to_have_attribute("data-answer", "possible")
    expect(box.locator(".possible-label")).to_have_text("Possible answer")
    expect(box.locator(".answer-text.possible")).to_contain_text(candidate["text"])
    expect(box.locator(".confidence")).to_have_text(f"extractive answer · {_percent(candidate['confidence'])}")
    assert box.locator(".hit").count() > 0
    assert _above_the_hits(box, ".answer")
    box.locator("details.check > summary").click()
    expect(box.locator(".check-confidence .reason")).to_contain_text("below the pipeline's min_confidence")


def test_uncited_answer_shows_no_answer_found_above_the_hits(page: Page, stack: Stack) -> None:
    # Strictly generative: the default (auto) would put the reader's snippet in its place.
    stack.oracle.cite = False
    box = _ask(page, stack.url, QUESTION, pipeline=_put_answers(stack, "strict", mode="generative"))
    expect(box).to_have_attribute("state", "abstained", timeout=ANSWER_TIMEOUT_MS)
    seen = _seen(page)
    names = [e["name"] for e in seen["events"]]
    # The snippet showed while the LLM wrote; the checked answer then took its place.
    assert names[:3] == ["search", "hits", "snippet"]
    assert names[-2:] == ["answer", "done"]
    # The LLM's sentence cited nothing and held up against nothing: it was never sent.
    assert "sentence" not in names
    abstention = seen["answer"]["answer"]
    assert abstention["abstained"]
    assert abstention["reason"] == "unsupported"
    assert abstention["candidate"] is None
    expect(box.locator(".answer")).to_have_attribute("data-answer", "none")
    expect(box.locator(".abstain")).to_have_text("No answer found in these results.")
    expect(box.locator(".chip")).to_have_count(0)
    assert box.locator(".hit").count() > 0
    assert _above_the_hits(box, ".abstain")
    expect(box).not_to_have_attribute("degraded", "")


@needs_model
def test_llm_down_shows_the_degraded_state_with_the_extractive_answer(page: Page, stack: Stack) -> None:
    stack.llm.fail = True
    box = _ask(page, stack.url, QUESTION)
    expect(box).to_have_attribute("state", "answered", timeout=ANSWER_TIMEOUT_MS)
    expect(box).to_have_attribute("degraded", "")
    expect(box.locator(".degraded")).to_contain_text("The LLM failed")
    expect(box.locator(".degraded")).to_contain_text("This is the extractive fallback answer.")
    expect(box.locator(".answer-text")).to_have_attribute("data-mode", "extractive")
    citation = _seen(page)["answer"]["answer"]["citations"][0]
    box.locator(".chip").first.click()
    expect(box.locator(f'.hit[data-id="{citation["_id"]}"] mark.quote')).to_have_text(citation["quote"])


def test_search_error_shows_the_error_state(page: Page, stack: Stack) -> None:
    box = _ask(page, stack.url, QUESTION, index="no-such-index", pipeline="answers")
    expect(box).to_have_attribute("state", "error", timeout=ANSWER_TIMEOUT_MS)
    expect(box.locator(".status")).to_contain_text("no such index")
    expect(box.locator(".hit")).to_have_count(0)


@pytest.fixture
def hostile_document(stack: Stack) -> Iterator[dict[str, str]]:
    """A document whose text is markup, in the module's index for one test."""
    document = {
        "title": '<img src=x onerror="window.pwned=1">Super Bowl 50',
        "text": "<script>window.pwned=2</script> Super Bowl 50 was played.",
    }
    cluster = OpenSearch(hosts=[stack.opensearch_url])
    cluster.index(index=SAMPLE_INDEX, id="hostile", body=document, refresh=True)
    yield document
    cluster.delete(index=SAMPLE_INDEX, id="hostile", refresh=True)


def test_document_text_is_shown_as_text_never_run(page: Page, stack: Stack, hostile_document: dict[str, str]) -> None:
    box = _ask(page, stack.url, QUESTION)
    expect(box).to_have_attribute("state", "answered", timeout=ANSWER_TIMEOUT_MS)
    card = box.locator('.hit[data-id="hostile"]')
    expect(card.locator(".hit-title")).to_have_text(hostile_document["title"])
    expect(card.locator(".hit-text")).to_have_text(hostile_document["text"])
    assert card.locator("img, script").count() == 0
    assert page.evaluate("window.pwned") is None


def test_embedded_element_answers_a_sites_own_search_bar(page: Page, stack: Stack) -> None:
    site = f"{stack.url}/site/search"
    html = (
        "<!doctype html><title>Site search</title>"
        '<form action="/site/search"><input type="search" name="q" id="site-q"><button>Go</button></form>'
        '<script type="module" src="/_answerbox/ui/answerbox.js"></script>'
        f'<answer-box index="{SAMPLE_INDEX}" pipeline="answers" query-param="q"></answer-box>'
    )
    # The site's own page, served at answerbox's origin as a reverse proxy would.
    page.route(re.compile(r".*/site/search(\?.*)?$"), lambda route: route.fulfill(content_type="text/html", body=html))
    page.goto(site)
    box = page.locator("answer-box")
    expect(box).to_have_attribute("state", "idle")
    page.fill("#site-q", QUESTION)
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/site/search\?q=.+"))
    expect(box).to_have_attribute("state", "answered", timeout=ANSWER_TIMEOUT_MS)
    expect(box.locator(".chip")).to_have_count(1)


@pytest.mark.real_llm
def test_real_llm_answer_streams_into_the_page(
    make_answerbox: AnswerboxFactory, client: httpx.Client, page: Page, real_llm: tuple[RecordingProxy, str]
) -> None:
    recorder, llm_url = real_llm
    # SmolLM2-135M on two cores: a minute for the answer; past it the fallback shows.
    url = make_answerbox(
        llm={"base_url": llm_url, "timeout_s": 60}, limits={"processor_timeout_s": 90, "pipeline_budget_s": 90}
    )
    _register_pipelines(client, url)
    box = _ask(page, url, QUESTION)
    expect(box).to_have_attribute("state", re.compile(r"^(answered|possible|abstained)$"), timeout=150_000)
    seen = _seen(page)
    answer = seen["answer"]["answer"]
    assert box.locator(".hit").count() > 0
    assert completions(recorder), "the page's question never reached the LLM"
    # Checked sentences only, each added to what was shown; a small model whose sentences do
    # not hold up (or that fails) gets the fallback, and the page says so.
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(seen["sentences"]))
    if answer["mode"] == "generative" and not answer["abstained"]:
        assert seen["sentences"]
    if box.get_attribute("degraded") is not None:
        expect(box.locator(".degraded")).to_contain_text("The LLM failed")


@needs_model
def test_follow_up_mode_keeps_one_memory_per_tab_and_shows_the_conversation(page: Page, stack: Stack) -> None:
    pipeline = _put_answers(stack, "chat", mode="extractive", min_confidence=0)
    page.goto(f"{stack.url}/_answerbox/ui")
    page.fill("#index", SAMPLE_INDEX)
    page.fill("#pipeline", pipeline)
    page.check("#followup")
    box = page.locator("answer-box")
    turns = page.locator("#conversation .turn")
    for n, question in enumerate(("Who won Super Bowl 50?", "Where was it played?"), 1):
        page.fill("#q", question)
        page.keyboard.press("Enter")
        expect(turns).to_have_count(n, timeout=ANSWER_TIMEOUT_MS)
        expect(box).to_have_attribute("state", re.compile(r"^(answered|possible|abstained)$"))
    memory_id = page.evaluate("sessionStorage.getItem('answerbox.memory')")
    assert memory_id
    assert box.get_attribute("memory-id") == memory_id
    expect(turns.nth(0).locator(".asked")).to_have_text("Who won Super Bowl 50?")
    expect(turns.nth(1).locator(".asked")).to_have_text("Where was it played?")
    expect(turns.nth(1).locator(".standalone")).to_have_text("read as: Where was Super Bowl 50 played?")
    stored = httpx.get(f"{stack.url}/_plugins/_ml/memory/{memory_id}/messages").json()["messages"]
    assert [m["input"] for m in stored] == ["Where was it played?", "Who won Super Bowl 50?"]
    assert "followup=1" in page.url

    # The tab keeps its conversation across a reload; a new conversation is a new memory.
    page.reload()
    expect(page.locator("#followup")).to_be_checked()
    expect(turns).to_have_count(2)
    page.click("#new-conversation")
    expect(turns).to_have_count(0)
    page.fill("#q", "Where was it played?")
    page.keyboard.press("Enter")
    expect(turns).to_have_count(1, timeout=ANSWER_TIMEOUT_MS)
    assert page.evaluate("sessionStorage.getItem('answerbox.memory')") not in (None, memory_id)
    expect(turns.nth(0).locator(".standalone")).to_have_count(0)  # nothing earlier to read it after

    # Without follow-up mode a question goes alone, with no memory.
    page.uncheck("#followup")
    expect(turns).to_have_count(0)
    page.fill("#q", QUESTION)
    page.keyboard.press("Enter")
    expect(box).to_have_attribute("state", re.compile(r"^(answered|possible|abstained)$"), timeout=ANSWER_TIMEOUT_MS)
    assert box.get_attribute("memory-id") is None
