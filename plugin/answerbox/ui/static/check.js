// The "how this was checked" view: what each processor reported under ext.answerbox,
// shown as a person would read it, with the full report of each one folded below it.
// Sections no processor wrote are left out.

import { el } from "./render.js";

const MAX_DEPTH = 4;

/** Any JSON value as nested definition lists; strings stay text. */
function describe(value, depth = 0) {
  if (value === null || typeof value !== "object") return el("span", { class: "value" }, JSON.stringify(value));
  if (depth >= MAX_DEPTH) return el("code", {}, JSON.stringify(value));
  if (Array.isArray(value)) return el("ol", { class: "list" }, ...value.map((item) => el("li", {}, describe(item, depth + 1))));
  const list = el("dl", { class: "fields" });
  for (const [key, item] of Object.entries(value)) list.append(el("dt", {}, key), el("dd", {}, describe(item, depth + 1)));
  return list;
}

function section(name, title, report, ...summary) {
  return el(
    "section",
    { class: `check-${name}`, "data-section": name },
    el("h4", {}, title),
    ...summary,
    report === null ? null : el("details", { class: "raw" }, el("summary", {}, "full report"), describe(report)),
  );
}

const line = (cls, text) => el("p", { class: cls }, text);
const score = (value) => (typeof value === "number" ? value.toFixed(2) : "—");

function expansion(report) {
  const how = report.fallback ? "the LLM was unavailable: the query was searched as written" : `${report.method}/${report.mode}`;
  return section(
    "query_expansion",
    "Query expansion",
    report,
    line("summary", how),
    report.expansion ? line("expansion", `Added to the query: ${report.expansion}`) : null,
  );
}

function retrieval(report) {
  const scores = (report.scores || []).map((s) => el("li", {}, `${s._id}: ${score(s.score)}`));
  return section(
    "retrieval",
    "Retrieval verdict",
    report,
    el("p", { class: `verdict verdict-${report.verdict}`, "data-verdict": report.verdict }, String(report.verdict)),
    line("summary", `action: ${report.action} · thresholds ${score(report.lower)} / ${score(report.upper)}`),
    scores.length ? el("ul", { class: "scores" }, ...scores) : null,
  );
}

// A node SearChain checked: its query, the answer the chain keeps, and what IR did with
// it (pass, correct, complete, not_found), with the reader's confidence against θ.
function chainNode(node, onPath, theta) {
  const verdict = node.verified ? "verified" : "not verified";
  return el(
    "li",
    { class: `chain-node${onPath ? " on-path" : ""}`, "data-action": node.action, "data-verified": String(Boolean(node.verified)) },
    el("p", { class: "chain-query" }, node.query),
    el("p", { class: "chain-answer" }, `→ ${node.answer ?? "(no answer)"}`),
    line(
      "chain-check",
      `${node.action} · ${verdict} · read in ${node.reference?._id ?? "no document"}, reader confidence ${score(node.confidence)} (θ ${score(theta)})`,
    ),
  );
}

function chain(report) {
  const path = new Set(report.path || []);
  const nodes = (report.nodes || []).map((node, i) => chainNode(node, path.has(i), report.theta));
  const outcome = report.abstained ? "abstained" : report.verified ? "every step verified" : "some steps unverified";
  return section(
    "chain",
    "Verified chain",
    report,
    line("summary", `${report.rounds} round(s), stopped: ${report.stopped}, ${outcome}`),
    nodes.length ? el("ol", { class: "chain-nodes" }, ...nodes) : null,
  );
}

function citations(list) {
  const rows = list.map((c) =>
    el(
      "tr",
      { "data-marker": c.marker },
      el("td", {}, `[${c.marker}]`),
      el("td", {}, `${c._index} / ${c._id} · ${c.field} ${c.start}–${c.end}`),
      el("td", {}, c.quote),
      el("td", {}, score(c.support)),
    ),
  );
  const head = el("tr", {}, ...["", "source", "quoted span", "support"].map((label) => el("th", {}, label)));
  return section("citations", "Citations", list, el("table", {}, el("thead", {}, head), el("tbody", {}, ...rows)));
}

// Sentences whose citation the check removed: shown so a reader knows what was not trusted.
function flagged(list) {
  const why = {
    no_evidence: "cites no evidence block",
    instructions: "the cited block gives the model instructions",
    unsupported: "the cited block does not support it",
    unchecked: "the evaluator was unavailable to check it",
    contradicted: "the cited block says otherwise",
    not_found: "the cited block does not say it",
  };
  // A contradicted sentence quotes the block's sentence; an unverified one the pipeline shows
  // anyway (cited_answer.unverified: show) is in the answer, not checked.
  const rows = list.map((f) =>
    el(
      "li",
      { "data-marker": f.marker, "data-verdict": f.verdict },
      `“${f.sentence}” [${f.marker}]: ${why[f.reason] ?? f.reason}${f.quote ? ` (“${f.quote}”)` : ""} (support ${score(f.support)})${f.shown ? "; shown, not checked" : ""}`,
    ),
  );
  return section("flagged", "Removed citations", list, el("ul", { class: "flagged" }, ...rows));
}

// How sure the answer is, and what the LLM did for it.
function confidence(answer) {
  const shown = answer.candidate || answer;
  const why = {
    low_confidence: "below the pipeline's min_confidence: shown as a possible answer",
    no_evidence: "the search found no evidence",
    retrieval_incorrect: "the retrieval evaluator judged the hits incorrect",
    unsupported: "no claim held up against the evidence",
    chain_unverified: "the chain verified nothing",
    unavailable: "no reader or LLM could answer",
  };
  return section(
    "confidence",
    "Confidence",
    { confidence: shown.confidence ?? null, reason: answer.reason ?? null, llm: answer.llm ?? null, signals: answer.signals ?? null },
    line("summary", `confidence ${score(shown.confidence)}${answer.llm ? ` · LLM ${answer.llm}` : ""}`),
    answer.abstained ? line("reason", `abstained: ${why[answer.reason] ?? answer.reason}`) : null,
  );
}

/** The sections of the view for one `ext.answerbox` report. */
export function renderCheck(report) {
  return [
    report.answer ? confidence(report.answer) : null,
    report.query_expansion ? expansion(report.query_expansion) : null,
    report.retrieval ? retrieval(report.retrieval) : null,
    report.chain ? chain(report.chain) : null,
    report.citations?.length ? citations(report.citations) : null,
    report.answer?.flagged?.length ? flagged(report.answer.flagged) : null,
    report.timings_ms ? section("timings", "Timings (ms)", null, describe(report.timings_ms)) : null,
  ].filter(Boolean);
}
