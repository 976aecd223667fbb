// The answer box page: a search form over a chosen index and pipeline, kept in the URL
// (?index=&pipeline=&q=&followup=1) so a search can be shared or reloaded. In follow-up
// mode each question is read after the ones before it, in this tab's memory.

import "./answerbox.js";
import { Conversation } from "./conversation.js";

const form = document.getElementById("search");
const box = document.getElementById("box");
const fields = ["index", "pipeline", "q"].map((name) => form.elements.namedItem(name));
const followup = document.getElementById("followup");
const restart = document.getElementById("new-conversation");
const conversation = new Conversation(document.getElementById("conversation"));

async function search() {
  const [index, pipeline, q] = fields.map((input) => input.value.trim());
  box.setAttribute("index", index);
  if (pipeline) box.setAttribute("pipeline", pipeline);
  else box.removeAttribute("pipeline");
  const params = new URLSearchParams(Object.entries({ index, pipeline, q }).filter(([, value]) => value));
  if (followup.checked) params.set("followup", "1");
  history.replaceState(null, "", `?${params}`);
  if (followup.checked) {
    try {
      box.setAttribute("memory-id", await conversation.memory());
    } catch {
      // No memory (the caller may not write one): the question is asked alone.
      box.removeAttribute("memory-id");
    }
  } else box.removeAttribute("memory-id");
  box.ask(q);
}

function showMode() {
  restart.hidden = !followup.checked;
  if (followup.checked) conversation.show();
  else conversation.list.replaceChildren();
}

async function suggest(listId, path, names) {
  try {
    const response = await fetch(path, { credentials: "same-origin" });
    if (!response.ok) return;
    const options = names(await response.json()).map((name) => Object.assign(document.createElement("option"), { value: name }));
    document.getElementById(listId).replaceChildren(...options);
  } catch {
    // Suggestions only: a caller who may not list indices or pipelines can still type them.
  }
}

form.addEventListener("submit", (event) => {
  event.preventDefault();
  search();
});

followup.addEventListener("change", showMode);
restart.addEventListener("click", () => {
  conversation.forget();
  box.removeAttribute("memory-id");
});
// Once a question is answered (and stored), the conversation shows it.
box.addEventListener("answerbox:done", () => {
  if (box.hasAttribute("memory-id")) conversation.show();
});

const params = new URLSearchParams(location.search);
for (const input of fields) input.value = params.get(input.name) || "";
followup.checked = params.get("followup") === "1";
showMode();
suggest("indices", "../../_cat/indices?format=json&h=index", (rows) => rows.map((row) => row.index).filter((name) => !name.startsWith(".")));
suggest("pipelines", "../../_search/pipeline", (pipelines) => Object.keys(pipelines));
// A shared link asks its question; a reloaded conversation shows what it holds instead of
// asking its last question again.
if (!followup.checked && fields.every((input) => input.name === "pipeline" || input.value)) search();
