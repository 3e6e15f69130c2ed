// The composer's first row: the filter typed above the model picker, a new chat's Settings beside
// it, and the note under it when the model picked is known to answer by calling a tool and no
// tool is on (its answer would be a call that nothing runs).
//
// The filter takes the models that do not match out of the <select> (and puts them back), rather
// than hiding them: a phone's own picker shows every <option>, hidden or not. The select stays
// the one control that is posted, with its label, so it works as before without this script.

import { keptChoice, matches, steppedChoice } from "./model_filter.js";

const byId = (id) => document.getElementById(id);

// --- The filter ------------------------------------------------------------------------------

// Each picker's options as the server listed them: [group or null, [option, ...]] in order.
const listed = new WeakMap();

function entries(picker) {
  if (!listed.has(picker)) {
    const found = [];
    for (const child of picker.children) {
      if (child instanceof HTMLOptGroupElement) found.push([child, [...child.children]]);
      else found.push([null, [child]]);
    }
    listed.set(picker, found);
  }
  return listed.get(picker);
}

const choosable = (option) => !option.disabled && option.value !== "";

function applyFilter(picker, query) {
  const before = picker.value; // before any option moves: taking the picked one out changes it
  const all = entries(picker);
  const matching = all.map(([group, options]) => [
    group,
    options.filter(
      (option) => choosable(option) && matches(query, option.label, option.value, group?.label ?? ""),
    ),
  ]);
  const shown = matching.flatMap(([, options]) => options);
  const total = all.flatMap(([, options]) => options).filter(choosable).length;
  const count = byId("model-filter-count");
  const narrowed = query.trim() !== "" && shown.length > 0;
  const kept = narrowed ? matching : all;
  const nodes = [];
  for (const [group, options] of kept) {
    if (!options.length) continue;
    if (group) {
      group.replaceChildren(...options);
      nodes.push(group);
    } else nodes.push(...options);
  }
  picker.replaceChildren(...nodes);
  const values = [...picker.options].filter(choosable).map((option) => option.value);
  picker.value = keptChoice(before, values);
  if (count) {
    if (!query.trim()) count.textContent = "";
    else if (!shown.length) count.textContent = "None match";
    else count.textContent = `${shown.length} of ${total}`;
  }
  if (picker.value !== before) picker.dispatchEvent(new Event("change", { bubbles: true }));
}

function step(picker, by) {
  const values = [...picker.options].filter(choosable).map((option) => option.value);
  const next = steppedChoice(picker.value, values, by);
  if (next && next !== picker.value) {
    picker.value = next;
    picker.dispatchEvent(new Event("change", { bubbles: true }));
  }
}

const withFilter = new WeakSet();

function setupFilter() {
  const input = byId("model-filter");
  const picker = byId("model");
  if (!input || !picker || withFilter.has(input)) return;
  withFilter.add(input);
  input.closest(".model-filter").hidden = false;
  input.addEventListener("input", () => applyFilter(picker, input.value));
  input.addEventListener("keydown", (event) => {
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      step(picker, event.key === "ArrowDown" ? 1 : -1);
    } else if (event.key === "Enter" && !event.isComposing) {
      event.preventDefault(); // not the composer's submit: the model is chosen, write on
      byId("message")?.focus();
    } else if (event.key === "Escape" && input.value) {
      event.preventDefault(); // not the composer's Stop
      input.value = "";
      applyFilter(picker, "");
    }
  });
}

// --- A model that answers by calling a tool, with no tool on -----------------------------------

// The tools that apply: a new chat's as its Settings are ticked now, a conversation's as saved.
function toolsOn() {
  const boxes = document.querySelectorAll('#composer input[name="tools"]');
  if (boxes.length) return [...boxes].some((box) => box.checked);
  return byId("answer-settings")?.dataset.toolsOn === "true";
}

function syncToolsNote() {
  const note = document.querySelector("#composer [data-tools-note]");
  const option = byId("model")?.selectedOptions[0];
  if (note) note.hidden = !(option && option.dataset.wantsTools !== undefined && !toolsOn());
}

function turnToolsOn() {
  const menu =
    document.querySelector("#composer details.new-chat-settings") ||
    document.querySelector("#answer-settings details.settings-menu");
  if (!menu) return;
  menu.open = true;
  const box = menu.querySelector('input[name="tools"]');
  box?.scrollIntoView({ block: "nearest" });
  box?.focus();
}

// --- A new chat's Settings ---------------------------------------------------------------------

document.addEventListener("click", (event) => {
  const target = event.target instanceof Element ? event.target : null;
  if (target?.closest("[data-choose-tools]")) turnToolsOn();
  const done = target?.closest("[data-settings-done]");
  if (done) {
    const menu = done.closest("details");
    menu.open = false;
    menu.querySelector("summary").focus();
  }
});

// Enter in one of its fields is not the composer's submit (which would send the draft).
document.addEventListener("keydown", (event) => {
  const field = event.target instanceof Element && event.target.closest(".new-chat-settings input");
  if (field && event.key === "Enter") event.preventDefault();
});

// A send refused by the browser for a field of a closed Settings shows that field.
document.addEventListener(
  "invalid",
  (event) => {
    const menu = event.target.closest?.("details.new-chat-settings");
    if (menu) menu.open = true;
  },
  true,
);

document.addEventListener("change", (event) => {
  if (event.target.id === "model" || event.target.name === "tools") syncToolsNote();
});

function setup() {
  setupFilter();
  syncToolsNote();
}

document.addEventListener("htmx:load", setup);
setup();
