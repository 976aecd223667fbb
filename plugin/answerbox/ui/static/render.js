// DOM for hits and answers. Text from documents and from the LLM goes in as text nodes,
// never as HTML: it is data, and a document must not be able to script the page.

const SNIPPET_CHARS = 320;
const QUOTE_CONTEXT_CHARS = 240;
// As the server parses them (processors/citations.py): [1], [1, 2], [1; 3].
const MARKER_GROUP = /\[\s*\d+(?:\s*[,;]\s*\d+)*\s*\]/g;

/** `el("p", {class: "x"}, "text", child)`: attributes are set as attributes, children appended. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value !== null && value !== undefined && value !== false) node.setAttribute(name, value === true ? "" : String(value));
  }
  node.append(...children.filter((child) => child !== null && child !== undefined));
  return node;
}

export function hitKey(index, id) {
  return `${index}\u0000${id}`;
}

// Python slices strings by code point and JavaScript by UTF-16 unit: the spans answerbox
// sends are code-point offsets, so texts are cut as arrays of code points here.
const codePoints = (text) => Array.from(text);

function fieldValue(source, path) {
  const value = path.split(".").reduce((node, key) => (node && typeof node === "object" ? node[key] : undefined), source);
  return typeof value === "string" ? value : null;
}

/** The hit's text to show: `preferred` when the document has it, else its longest string field. */
export function displayText(hit, preferred) {
  const source = hit._source || {};
  const chosen = preferred && fieldValue(source, preferred);
  if (chosen) return chosen;
  const strings = Object.values(source).filter((value) => typeof value === "string");
  return strings.sort((a, b) => b.length - a.length)[0] || "";
}

function snippet(text) {
  const chars = codePoints(text);
  return chars.length > SNIPPET_CHARS ? `${chars.slice(0, SNIPPET_CHARS).join("")}…` : text;
}

/** One `<li>` per hit, keyed by `data-index`/`data-id` so citations can find theirs. */
export function renderHits(hits, { titleField, textField }) {
  return hits.map((hit, position) => {
    const title = (titleField && fieldValue(hit._source || {}, titleField)) || hit._id;
    const score = typeof hit._score === "number" ? ` · score ${hit._score.toFixed(2)}` : "";
    return el(
      "li",
      { class: "hit", id: `hit-${position + 1}`, "data-index": hit._index, "data-id": hit._id, tabindex: "-1", part: "hit" },
      el("h3", { class: "hit-title" }, title),
      el("p", { class: "hit-text" }, snippet(displayText(hit, textField))),
      el("div", { class: "hit-meta" }, `${hit._index} · ${hit._id}${score}`),
    );
  });
}

/** Code-point [start, end) of the quote in `text`: the given offsets if they hold the quote, else its first occurrence. */
function quoteSpan(text, { start, end, quote }) {
  const chars = codePoints(text);
  if (chars.slice(start, end).join("") === quote) return [start, end];
  const at = text.indexOf(quote);
  if (at < 0) return null;
  const from = codePoints(text.slice(0, at)).length;
  return [from, from + codePoints(quote).length];
}

/** Show the cited field of `hit` in its card with the quoted span marked; returns the `<mark>`. */
export function markQuote(card, hit, citation) {
  const text = fieldValue(hit._source || {}, citation.field) || displayText(hit, citation.field);
  const target = card.querySelector(".hit-text");
  const span = quoteSpan(text, citation);
  const mark = el("mark", { class: "quote", "data-marker": citation.marker }, citation.quote);
  if (span === null) {
    // The document changed since it was cited (or _source was filtered): show the quote alone.
    target.replaceChildren(mark);
    return mark;
  }
  const chars = codePoints(text);
  const [start, end] = span;
  const from = Math.max(0, start - QUOTE_CONTEXT_CHARS);
  const to = Math.min(chars.length, end + QUOTE_CONTEXT_CHARS);
  mark.textContent = chars.slice(start, end).join("");
  target.replaceChildren(
    from > 0 ? "…" : "",
    chars.slice(from, start).join(""),
    mark,
    chars.slice(end, to).join(""),
    to < chars.length ? "…" : "",
  );
  return mark;
}

/** A citation's chip; the citation rides along on the element for the click handler. */
function chip(citation) {
  const support = typeof citation.support === "number" ? ` (support ${citation.support.toFixed(2)})` : "";
  const button = el(
    "button",
    {
      type: "button",
      class: "chip",
      part: "chip",
      "data-marker": citation.marker,
      "data-index": citation._index,
      "data-id": citation._id,
      title: `“${citation.quote}”${support}`,
      "aria-label": `Source ${citation.marker}: ${citation._id}`,
    },
    String(citation.marker),
  );
  button.citation = citation;
  return button;
}

/**
 * The answer text with each marker group (`[1]`, `[1, 2]`) turned into chip buttons. The
 * n-th occurrence of marker k gets the n-th citation with marker k: citations come in the
 * order of the sentences they support.
 */
export function renderAnswerText(answer) {
  const byMarker = new Map();
  for (const citation of answer.citations) byMarker.set(citation.marker, [...(byMarker.get(citation.marker) || []), citation]);
  const seen = new Map();
  const nodes = [];
  let last = 0;
  for (const group of answer.text.matchAll(MARKER_GROUP)) {
    nodes.push(answer.text.slice(last, group.index));
    last = group.index + group[0].length;
    for (const number of group[0].match(/\d+/g).map(Number)) {
      const cited = byMarker.get(number);
      if (!cited) {
        nodes.push(`[${number}]`);
        continue;
      }
      const nth = seen.get(number) ?? 0;
      seen.set(number, nth + 1);
      nodes.push(chip(cited[Math.min(nth, cited.length - 1)]));
    }
  }
  nodes.push(answer.text.slice(last));
  // Citations the text does not mark (an extractive answer is the quote itself) get chips after it.
  for (const [marker, cited] of byMarker) if (!seen.has(marker)) nodes.push(" ", chip(cited[0]));
  const unverified = (answer.flagged || []).filter((f) => f.shown).map((f) => f.sentence);
  return unverified.length ? nodes.flatMap((node) => (typeof node === "string" ? marked(node, unverified) : [node])) : nodes;
}

// A sentence shown though no citation of it held up (cited_answer.unverified: show) is set
// apart as not checked, as it was while it streamed.
function marked(text, sentences) {
  const at = sentences.map((s) => [text.indexOf(s), s]).filter(([i]) => i >= 0).sort((a, b) => a[0] - b[0]);
  if (!at.length) return [text];
  const [i, sentence] = at[0];
  const span = el("span", { class: "sentence", "data-verdict": "unverified", title: "not checked" }, sentence);
  return [text.slice(0, i), span, ...marked(text.slice(i + sentence.length), sentences)];
}
