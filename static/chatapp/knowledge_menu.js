// Collections and files to draw on, chosen in the composer: "#" and the start of a name in the
// message box offers the user's collections and files (composer_menu.js's listbox, as "/" offers
// prompts); the chosen ones leave the box and show as chips under it, each with a Remove button,
// and go with the message as hidden fields (`collections`, `knowledge_files`), until it is sent.
// The list is asked of the server (`data-url`, views.knowledge_menu) when a "#" is first typed and
// again at most every REFRESH_MS, so a page costs nothing until it is used.

import { composerMenu } from "./composer_menu.js";
import { matchingSources, sourceKey, typedTag, withoutTag } from "./knowledge_choice.js";

const REFRESH_MS = 30_000;
const FIELDS = { collection: "collections", file: "knowledge_files" };

let entries = [];
let fetchedAt = -Infinity;
let fetching = null;

function list() {
  return document.getElementById("knowledge-menu");
}

function chips() {
  return document.querySelector("#composer .knowledge-chips");
}

function chosenKeys() {
  const found = chips();
  return new Set([...(found?.querySelectorAll("[data-source]") || [])].map((chip) => chip.dataset.source));
}

function load(box) {
  const url = list()?.dataset.url;
  if (!url || fetching || performance.now() - fetchedAt < REFRESH_MS) return;
  fetching = fetch(url, { headers: { Accept: "application/json" } })
    .then((response) => (response.ok ? response.json() : Promise.reject(response.status)))
    .then((data) => {
      entries = Array.isArray(data.entries) ? data.entries : [];
      fetchedAt = performance.now();
      update(box); // shown now that they are here, if the "#" is still being typed
    })
    .catch(() => {})
    .finally(() => {
      fetching = null;
    });
}

function find(box) {
  const tag = typedTag(box.value, box.selectionEnd ?? box.value.length);
  if (!tag) return null;
  load(box);
  const found = matchingSources(entries, tag.name, chosenKeys());
  if (!found.length) {
    const words = fetching ? "" : entries.length ? `Nothing named #${tag.name}` : "No collections or files yet";
    return { entries: [], said: words };
  }
  const count = found.length === 1 ? "1 document source" : `${found.length} document sources`;
  return { entries: found, said: `${count}: up and down arrows to choose, Enter to add` };
}

function option(entry) {
  const name = document.createElement("strong");
  name.textContent = `#${entry.name}`;
  const detail = document.createElement("span");
  detail.className = "prompt-preview";
  detail.textContent = entry.detail || (entry.kind === "collection" ? "collection" : "file");
  return [name, " ", detail];
}

function addChip(entry) {
  const found = chips();
  if (!found || chosenKeys().has(sourceKey(entry))) return;
  const chip = document.createElement("li");
  chip.className = `knowledge-chip ${entry.kind}`;
  chip.dataset.source = sourceKey(entry);
  const label = document.createElement("span");
  label.className = "attached-name";
  label.textContent = `#${entry.name}`;
  const field = document.createElement("input");
  field.type = "hidden";
  field.name = FIELDS[entry.kind];
  field.value = String(entry.id);
  const remove = document.createElement("button");
  remove.type = "button";
  remove.className = "remove-knowledge";
  remove.setAttribute("aria-label", `Remove #${entry.name}`);
  remove.textContent = "✕";
  chip.append(label, field, remove);
  found.append(chip);
  found.hidden = false;
}

function choose(box, entry) {
  const tag = typedTag(box.value, box.selectionEnd ?? box.value.length);
  if (tag) {
    const left = withoutTag(box.value, tag);
    box.value = left.value;
    box.setSelectionRange(left.caret, left.caret);
  }
  addChip(entry);
  box.focus();
  box.dispatchEvent(new Event("input", { bubbles: true }));
}

const update = composerMenu({
  listId: "knowledge-menu",
  statusId: "knowledge-menu-status",
  optionPrefix: "knowledge-option",
  key: sourceKey,
  find,
  option,
  choose,
});

document.addEventListener("click", (event) => {
  const button = event.target.closest?.(".remove-knowledge");
  const found = chips();
  if (!button || !found?.contains(button)) return;
  button.closest("li").remove();
  found.hidden = !found.children.length;
  document.getElementById("message")?.focus();
});

// Sent with the message: the next one starts with none chosen, as with attached files.
document.addEventListener("htmx:afterRequest", (event) => {
  const found = chips();
  if (!found || event.target.id !== "composer") return;
  const refused = event.detail.xhr?.getResponseHeader("HX-Retarget") === "#composer-error";
  if (event.detail.successful && !refused) {
    found.replaceChildren();
    found.hidden = true;
  }
});
