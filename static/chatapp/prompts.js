// Saved prompts in the composer: typing "/" and a name in an empty message box lists the prompts
// whose names match (a listbox under the box, which is its combobox: arrows move, Enter inserts,
// Esc closes, and Tab moves on as anywhere else, closing it);
// one with {{variables}} asks for each in a small dialog first (a multi-line field each: Enter
// goes to the next, Shift+Enter is a new line), then the box holds its text with them filled. A
// field left empty is said, and inserted blank only when Insert is pressed again. The prompts come with the page (`#prompt-menu-data`, views.prompts.menu_data);
// which names match and how variables are filled are prompt_text.js's.

import { fill, matching, typedName } from "./prompt_text.js";

let menu = null; // {box, entries, active}

function prompts() {
  const data = document.getElementById("prompt-menu-data");
  if (!data) return [];
  try {
    const parsed = JSON.parse(data.textContent);
    return Array.isArray(parsed) ? parsed : [];
  } catch {
    return [];
  }
}

function list() {
  return document.getElementById("prompt-menu");
}

function say(text) {
  const status = document.getElementById("prompt-menu-status");
  if (status && status.textContent !== text) status.textContent = text;
}

function close() {
  const box = menu?.box;
  menu = null;
  const element = list();
  if (element) {
    element.hidden = true;
    element.replaceChildren();
  }
  if (box) {
    box.removeAttribute("aria-activedescendant");
    box.setAttribute("aria-expanded", "false");
  }
}

function render() {
  const element = list();
  if (!element || !menu) return;
  element.replaceChildren(
    ...menu.entries.map((entry, index) => {
      const option = document.createElement("li");
      option.id = `prompt-option-${index}`;
      option.setAttribute("role", "option");
      option.setAttribute("aria-selected", String(index === menu.active));
      option.dataset.index = String(index);
      const name = document.createElement("strong");
      name.textContent = `/${entry.name}`;
      const preview = document.createElement("span");
      preview.className = "prompt-preview";
      preview.textContent = entry.text.replace(/\s+/g, " ").slice(0, 90);
      option.append(name, " ", preview);
      if (entry.shared) {
        const shared = document.createElement("span");
        shared.className = "prompt-shared";
        shared.textContent = "shared";
        option.append(" ", shared);
      }
      return option;
    }),
  );
  element.hidden = false;
  menu.box.setAttribute("aria-expanded", "true");
  menu.box.setAttribute("aria-activedescendant", `prompt-option-${menu.active}`);
  element.querySelector('[aria-selected="true"]')?.scrollIntoView({ block: "nearest" });
}

function update(box) {
  const typed = typedName(box.value);
  const entries = typed === null ? [] : matching(prompts(), typed);
  if (!entries.length) {
    if (menu) close();
    say(typed ? `No saved prompt named /${typed}` : "");
    return;
  }
  const active = menu && menu.entries[menu.active] && entries.includes(menu.entries[menu.active])
    ? entries.indexOf(menu.entries[menu.active])
    : 0;
  menu = { box, entries, active };
  render();
  const count = entries.length === 1 ? "1 prompt" : `${entries.length} prompts`;
  say(`${count}: up and down arrows to choose, Enter to insert`);
}

function insert(box, text) {
  box.value = text;
  box.focus();
  box.setSelectionRange(text.length, text.length);
  box.dispatchEvent(new Event("input", { bubbles: true }));
}

// The dialog asking for each variable; Insert fills them, Cancel (or Esc) puts the box back.
function askVariables(box, entry) {
  const dialog = document.createElement("dialog");
  dialog.className = "prompt-variables";
  dialog.setAttribute("aria-labelledby", "prompt-variables-title");
  const form = document.createElement("form");
  form.method = "dialog";
  const title = document.createElement("h2");
  title.id = "prompt-variables-title";
  title.textContent = `Fill in /${entry.name}`;
  const preview = document.createElement("p");
  preview.className = "prompt-variables-text";
  preview.textContent = entry.text;
  form.append(title, preview);
  entry.variables.forEach((name, index) => {
    const id = `prompt-variable-${index}`;
    const label = document.createElement("label");
    label.htmlFor = id;
    label.textContent = name;
    const input = document.createElement("textarea");
    input.id = id;
    input.name = name;
    input.rows = 2;
    input.autocomplete = "off";
    form.append(label, input);
  });
  const note = document.createElement("p");
  note.className = "prompt-variables-note";
  note.setAttribute("role", "status");
  form.append(note);
  const actions = document.createElement("div");
  actions.className = "prompt-variables-actions";
  const cancel = document.createElement("button");
  cancel.type = "button";
  cancel.textContent = "Cancel";
  const submit = document.createElement("button");
  submit.type = "submit";
  submit.className = "primary";
  submit.textContent = "Insert";
  actions.append(cancel, submit);
  form.append(actions);
  dialog.append(form);
  document.body.append(dialog);
  const typed = box.value;
  const fields = [...form.querySelectorAll("textarea")];
  let inserted = false;
  let blanksAllowed = false; // said once which are empty; Insert again leaves them blank
  form.addEventListener("submit", (event) => {
    const empty = fields.filter((field) => !field.value.trim());
    if (empty.length && !blanksAllowed) {
      event.preventDefault();
      blanksAllowed = true;
      const names = empty.map((field) => `“${field.name}”`).join(", ");
      note.textContent = `Empty: ${names}. Fill it in, or press Insert again to leave it blank.`;
      empty[0].focus();
      return;
    }
    const values = {};
    for (const field of fields) values[field.name] = field.value;
    inserted = true;
    insert(box, fill(entry.text, values));
  });
  form.addEventListener("keydown", (event) => {
    const at = fields.indexOf(event.target);
    if (at < 0 || event.key !== "Enter" || event.shiftKey || event.isComposing) return;
    event.preventDefault();
    if (fields[at + 1]) fields[at + 1].focus();
    else form.requestSubmit(submit); // the last: inserted, or told which are empty
  });
  cancel.addEventListener("click", () => dialog.close());
  dialog.addEventListener("close", () => {
    dialog.remove();
    if (!inserted) insert(box, typed);
  });
  dialog.showModal();
  fields[0]?.focus();
}

function choose(index) {
  if (!menu) return;
  const { box, entries } = menu;
  const entry = entries[index];
  close();
  say("");
  if (!entry) return;
  if (entry.variables.length) askVariables(box, entry);
  else insert(box, entry.text);
}

document.addEventListener("input", (event) => {
  if (event.target?.id === "message") update(event.target);
});

// Capturing, so that Enter inserts the prompt rather than sending "/name" (composer.js).
document.addEventListener(
  "keydown",
  (event) => {
    if (!menu || event.target !== menu.box || event.isComposing) return;
    const keys = {
      ArrowDown: () => {
        menu.active = (menu.active + 1) % menu.entries.length;
        render();
      },
      ArrowUp: () => {
        menu.active = (menu.active - 1 + menu.entries.length) % menu.entries.length;
        render();
      },
      Enter: () => choose(menu.active),
      Escape: () => close(),
    };
    const act = keys[event.key];
    if (!act || (event.key === "Enter" && event.shiftKey)) return;
    event.preventDefault();
    event.stopImmediatePropagation();
    act();
  },
  true,
);

document.addEventListener("mousedown", (event) => {
  const option = event.target.closest?.("#prompt-menu [role=option]");
  if (option) {
    event.preventDefault(); // the box keeps its focus
    choose(Number(option.dataset.index));
  } else if (menu && event.target !== menu.box) close();
});

document.addEventListener("focusout", (event) => {
  if (menu && event.target === menu.box) close();
});
