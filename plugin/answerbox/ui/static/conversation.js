// Follow-up mode of the answer box page: one conversational memory per browser tab
// (sessionStorage), created on the first question, and the conversation so far shown above
// the box, read back from the memory itself (GET /_plugins/_ml/memory/{id}/messages).

import { el } from "./render.js";

const KEY = "answerbox.memory";
const ROOT = new URL("../../", import.meta.url);

async function call(method, path, body) {
  const response = await fetch(new URL(path, ROOT), {
    method,
    headers: body ? { "content-type": "application/json" } : {},
    body: body ? JSON.stringify(body) : undefined,
    credentials: "same-origin",
  });
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status}`);
  return response.json();
}

export class Conversation {
  constructor(list) {
    this.list = list;
  }

  get memoryId() {
    return sessionStorage.getItem(KEY);
  }

  /** The tab's memory, created the first time a follow-up question is asked. */
  async memory() {
    if (!this.memoryId) {
      const { memory_id } = await call("POST", "_plugins/_ml/memory", { name: "answerbox page" });
      sessionStorage.setItem(KEY, memory_id);
    }
    return this.memoryId;
  }

  forget() {
    sessionStorage.removeItem(KEY);
    this.list.replaceChildren();
  }

  /** The turns stored so far, oldest first; nothing when the tab has no memory yet. */
  async show() {
    if (!this.memoryId) return this.list.replaceChildren();
    try {
      const { messages } = await call("GET", `_plugins/_ml/memory/${encodeURIComponent(this.memoryId)}/messages?max_results=50`);
      this.list.replaceChildren(...messages.reverse().map(turn));
    } catch {
      // A memory that is gone (deleted, or another user's): start a new one.
      this.forget();
    }
  }
}

function turn(message) {
  const info = message.additional_info || {};
  const standalone = info.standalone_question && info.standalone_question !== message.input ? info.standalone_question : "";
  const answer = message.response || "No answer found.";
  return el(
    "li",
    { class: "turn", "data-message-id": message.message_id },
    el("p", { class: "asked" }, message.input),
    standalone ? el("p", { class: "standalone" }, `read as: ${standalone}`) : null,
    el("p", { class: `replied${message.response ? "" : " none"}` }, answer),
  );
}
