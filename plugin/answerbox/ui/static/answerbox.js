// <answer-box>: asks answerbox's stream endpoint and shows the answer as it arrives, its
// citations as chips that jump to the cited hit, how it was checked, and the hits.
//
//   <script type="module" src="https://search.example.com/_answerbox/ui/answerbox.js"></script>
//   <answer-box index="docs" pipeline="qa" query-param="q"></answer-box>
//
// Attributes: index (required), pipeline, fields (comma-separated; default: all),
// size (hits, default 10), title-field / text-field (what a hit shows), endpoint
// (answerbox's root URL; default: where this script came from), query-param (answer
// this URL parameter on load, for a site whose search bar submits to a results page),
// memory-id (a conversational memory, /_plugins/_ml/memory: each question is read as a
// follow-up of the ones before it, and stored there with its answer).
// A page that searches without reloading calls `box.ask(question)` instead.
// Read-only attributes it keeps current: state (idle, searching, answering, answered,
// possible, abstained, searched, error) and degraded (the LLM failed; the answer is a
// fallback). An answer shows its confidence; one below the pipeline's min_confidence is a
// muted "possible answer"; with neither, "No answer found in these results" stands above
// the hits. The reader's snippet shows the moment it arrives; each sentence of the LLM's shows
// once answerbox has checked it (never before: "Checking…" stands while one is held), and the
// final answer replaces them.
// It fires answerbox:search / :hits / :snippet / :sentence / :answer /
// :error / :done events carrying each stream event's data.

import { renderCheck } from "./check.js";
import { el, hitKey, markQuote, renderAnswerText, renderHits } from "./render.js";
import { readEvents } from "./sse.js";

const STYLESHEET = new URL("./answerbox.css", import.meta.url);
// The script is served at <answerbox>/_answerbox/ui/answerbox.js.
const DEFAULT_ENDPOINT = new URL("../../", import.meta.url);

function errorReason(body, fallback) {
  const error = body && typeof body === "object" ? body.error : null;
  if (error && typeof error === "object") return error.root_cause?.[0]?.reason || error.reason || fallback;
  return typeof error === "string" ? error : fallback;
}

async function failedResponseReason(response) {
  const text = await response.text();
  try {
    return errorReason(JSON.parse(text), `${response.status} ${response.statusText}`);
  } catch {
    // Not JSON (a proxy's HTML error page, say): the status line says enough.
    return `${response.status} ${response.statusText}`;
  }
}

const confidenceText = (value) => (typeof value === "number" ? `confidence ${Math.round(value * 100)}%` : "");

class AnswerBox extends HTMLElement {
  #status = el("p", { class: "status", role: "status", "aria-live": "polite", part: "status" });
  #answer = el("div", { class: "answer", part: "answer", "aria-live": "polite" });
  #warnings = el("div", { class: "warnings", part: "warnings", role: "note" });
  #checkBody = el("div", { class: "check-body" });
  #check = el("details", { class: "check", part: "check" }, el("summary", {}, "How this was checked"), this.#checkBody);
  #hits = el("ol", { class: "hits", part: "hits" });
  #hitData = new Map();
  #active = null;
  #controller = null;
  // Why the LLM failed mid-answer, when it did: the answer that follows is a fallback.
  #failure = null;

  constructor() {
    super();
    this.attachShadow({ mode: "open" }).append(
      el("link", { rel: "stylesheet", href: STYLESHEET.href }),
      this.#status,
      this.#answer,
      this.#warnings,
      this.#check,
      this.#hits,
    );
    this.#answer.addEventListener("click", (event) => {
      const chip = event.target.closest(".chip");
      if (chip) this.#jump(chip.citation);
    });
    this.#setState("idle", "");
  }

  connectedCallback() {
    const param = this.getAttribute("query-param");
    const question = param ? new URLSearchParams(location.search).get(param) : null;
    if (question?.trim()) this.ask(question.trim());
  }

  disconnectedCallback() {
    this.#controller?.abort();
  }

  get endpoint() {
    const base = new URL(this.getAttribute("endpoint") || DEFAULT_ENDPOINT, document.baseURI);
    // A root without its trailing slash would lose its last path segment when resolving.
    if (!base.pathname.endsWith("/")) base.pathname += "/";
    return base;
  }

  #searchBody(question) {
    const fields = (this.getAttribute("fields") || "").split(",").map((f) => f.trim()).filter(Boolean);
    const size = Number(this.getAttribute("size") || 10);
    const body = { size, query: { multi_match: fields.length ? { query: question, fields } : { query: question } } };
    const memoryId = this.getAttribute("memory-id");
    if (memoryId) body.ext = { generative_qa_parameters: { memory_id: memoryId } };
    return body;
  }

  /** Ask one question; a newer call cancels the one in flight. */
  async ask(question) {
    this.#controller?.abort();
    const controller = (this.#controller = new AbortController());
    this.#reset();
    const index = this.getAttribute("index");
    if (!index) return this.#fail("Choose an index to search.");
    this.#setState("searching", "Searching…");
    const url = new URL(`${encodeURIComponent(index)}/_answerbox/stream`, this.endpoint);
    const pipeline = this.getAttribute("pipeline");
    if (pipeline) url.searchParams.set("search_pipeline", pipeline);
    try {
      const response = await fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "text/event-stream" },
        body: JSON.stringify(this.#searchBody(question)),
        credentials: "same-origin",
        signal: controller.signal,
      });
      if (!response.ok || !(response.headers.get("content-type") || "").startsWith("text/event-stream")) {
        return this.#fail(await failedResponseReason(response));
      }
      for await (const { event, data } of readEvents(response)) {
        const detail = JSON.parse(data);
        this.#handle(event, detail);
        this.dispatchEvent(new CustomEvent(`answerbox:${event}`, { detail, bubbles: true, composed: true }));
      }
      if (["searching", "answering"].includes(this.getAttribute("state"))) this.#fail("The answer stream ended before it was done.");
    } catch (error) {
      // A newer question aborted this one: its own state is already on screen.
      if (error.name === "AbortError") return;
      this.#fail(`The answer stream failed: ${error.message}`);
    }
  }

  #handle(event, data) {
    // search: the hits as found, at once; hits: the same after the evaluator (re-ranked, judged).
    if (event === "search" || event === "hits") this.#showHits(data);
    else if (event === "snippet") this.#showAnswer(data, "answering");
    else if (event === "sentence") this.#appendSentence(data);
    else if (event === "answer") this.#showReport(data);
    else if (event === "error") this.#interrupted(errorReason(data, "the answer failed"));
    else if (event === "done" && this.getAttribute("state") === "answering") this.#setState("searched", this.#noHitsMessage());
  }

  #noHitsMessage() {
    return this.#hitData.size ? "" : "No results.";
  }

  #reset() {
    this.#active = null;
    this.#hitData.clear();
    this.#answer.replaceChildren();
    this.#warnings.replaceChildren();
    this.#checkBody.replaceChildren();
    this.#check.hidden = true;
    this.#hits.replaceChildren();
    this.#failure = null;
    this.removeAttribute("degraded");
  }

  #setState(state, message) {
    this.setAttribute("state", state);
    this.#status.textContent = message;
    this.#status.dataset.state = state;
  }

  #fail(reason) {
    this.#answer.replaceChildren();
    this.#setState("error", reason);
  }

  // An error event mid-stream is the LLM failing: the streamed text is dropped and the
  // fallback answer (or the final error) follows in the answer event.
  #interrupted(reason) {
    this.#failure = reason;
    this.setAttribute("degraded", "");
    this.#answer.replaceChildren();
    this.#setState("answering", `The LLM failed (${reason}); falling back…`);
  }

  #showHits(response) {
    const hits = response.hits?.hits || [];
    for (const hit of hits) this.#hitData.set(hitKey(hit._index, hit._id), hit);
    const fields = { titleField: this.getAttribute("title-field") || "title", textField: this.getAttribute("text-field") };
    this.#hits.replaceChildren(...renderHits(hits, fields));
    this.#setState("answering", hits.length ? "Writing the answer…" : this.#noHitsMessage());
  }

  // The LLM's checked sentences go below the snippet, if one is shown: the answer event
  // decides which stays. Only checked text ever reaches the page.
  #appendSentence(sentence) {
    let live = this.#answer.querySelector(".answer-text.streaming");
    if (!live) {
      live = el("p", { class: "answer-text streaming" });
      this.#answer.append(live);
    }
    const shown = el("span", { class: "sentence", "data-verdict": sentence.verdict }, ...renderAnswerText(sentence));
    live.append(...(live.childElementCount ? [" ", shown] : [shown]));
    this.#setState("answering", "Checking the next sentence…");
  }

  #showReport(report) {
    const answer = report.answer;
    const fallback = answer && !answer.abstained ? `This is the ${answer.mode} fallback answer.` : "No fallback answer could be made.";
    const banner = this.#failure ? el("p", { class: "degraded" }, `The LLM failed (${this.#failure}). ${fallback}`) : null;
    const warnings = report.warnings?.length ? el("ul", { class: "warning-list" }, ...report.warnings.map((w) => el("li", {}, w))) : null;
    this.#warnings.replaceChildren(...[banner, warnings].filter(Boolean));
    this.#checkBody.replaceChildren(...renderCheck(report));
    this.#check.hidden = this.#checkBody.childElementCount === 0;
    if (!answer) {
      this.#answer.replaceChildren();
      return this.#setState("searched", this.#noHitsMessage());
    }
    this.#showAnswer(answer);
  }

  // One of three states: an answer; a possible answer (below min_confidence: muted, with its
  // confidence); no answer. `during` keeps the box's state while the stream goes on (a snippet).
  #showAnswer(answer, during) {
    const candidate = answer.abstained ? answer.candidate : null;
    const shown = candidate || answer;
    this.#answer.dataset.answer = candidate ? "possible" : answer.abstained ? "none" : "answer";
    if (answer.abstained && !candidate) {
      this.#answer.replaceChildren(
        el("p", { class: "abstain" }, "No answer found in these results."),
        el("p", { class: "mode" }, answer.text),
      );
      return this.#setState(during || "abstained", during ? "Writing the answer…" : "");
    }
    const label = candidate ? el("p", { class: "possible-label" }, "Possible answer") : null;
    const text = el("p", { class: `answer-text${candidate ? " possible" : ""}`, "data-mode": shown.mode }, ...renderAnswerText(shown));
    const about = [`${shown.mode} answer`, confidenceText(shown.confidence)].filter(Boolean).join(" · ");
    this.#answer.replaceChildren(...[label, text, el("p", { class: "mode confidence" }, about)].filter(Boolean));
    this.#setState(during || (candidate ? "possible" : "answered"), during ? "Checking with the LLM…" : "");
  }

  #card(citation) {
    const found = [...this.#hits.children].find((li) => li.dataset.index === citation._index && li.dataset.id === citation._id);
    if (found) return found;
    // A chain step can cite a document its own sub-search found, outside these hits.
    const [extra] = renderHits([{ _index: citation._index, _id: citation._id, _source: {} }], {});
    extra.classList.add("extra");
    extra.id = `hit-cited-${citation.marker}`;
    this.#hits.append(extra);
    this.#hitData.set(hitKey(citation._index, citation._id), { _index: citation._index, _id: citation._id, _source: {} });
    return extra;
  }

  #jump(citation) {
    const card = this.#card(citation);
    if (this.#active && this.#active !== card) {
      this.#active.classList.remove("active");
      this.#active.removeAttribute("aria-current");
    }
    this.#active = card;
    card.classList.add("active");
    card.setAttribute("aria-current", "true");
    markQuote(card, this.#hitData.get(hitKey(citation._index, citation._id)), citation);
    const smooth = !matchMedia("(prefers-reduced-motion: reduce)").matches;
    card.scrollIntoView({ block: "center", behavior: smooth ? "smooth" : "auto" });
    card.focus({ preventScroll: true });
  }
}

customElements.define("answer-box", AnswerBox);
