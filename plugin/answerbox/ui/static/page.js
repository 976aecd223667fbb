// The answer box page: a search form over a chosen index and pipeline, kept in the URL
// (?index=&pipeline=&q=) so a search can be shared or reloaded.

import "./answerbox.js";

const form = document.getElementById("search");
const box = document.getElementById("box");
const fields = ["index", "pipeline", "q"].map((name) => form.elements.namedItem(name));

function search() {
  const [index, pipeline, q] = fields.map((input) => input.value.trim());
  box.setAttribute("index", index);
  if (pipeline) box.setAttribute("pipeline", pipeline);
  else box.removeAttribute("pipeline");
  const params = new URLSearchParams(Object.entries({ index, pipeline, q }).filter(([, value]) => value));
  history.replaceState(null, "", `?${params}`);
  box.ask(q);
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

const params = new URLSearchParams(location.search);
for (const input of fields) input.value = params.get(input.name) || "";
suggest("indices", "../../_cat/indices?format=json&h=index", (rows) => rows.map((row) => row.index).filter((name) => !name.startsWith(".")));
suggest("pipelines", "../../_search/pipeline", (pipelines) => Object.keys(pipelines));
if (fields.every((input) => input.name === "pipeline" || input.value)) search();
