// Saved prompts in the composer: typing "/" and a name in an empty message box lists the prompts
// whose names match (composer_menu.js's listbox: arrows move, Enter inserts, Esc closes);
// one with {{variables}} asks for each in a small dialog first (a multi-line field each: Enter
// goes to the next, Shift+Enter is a new line), then the box holds its text with them filled. A
// field left empty is said, and inserted blank only when Insert is pressed again. The prompts come with the page (`#prompt-menu-data`, views.prompts.menu_data);
// which names match and how variables are filled are prompt_text.js's.

import { composerMenu } from "./composer_menu.js";
import { fill, matching, typedName } from "./prompt_text.js";

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

function option(entry) {
  const name = document.createElement("strong");
  name.textContent = `/${entry.name}`;
  const preview = document.createElement("span");
  preview.className = "prompt-preview";
  preview.textContent = entry.text.replace(/\s+/g, " ").slice(0, 90);
  const nodes = [name, " ", preview];
  if (entry.shared) {
    const shared = document.createElement("span");
    shared.className = "prompt-shared";
    shared.textContent = "shared";
    nodes.push(" ", shared);
  }
  return nodes;
}

function find(box) {
  const typed = typedName(box.value);
  const entries = typed === null ? [] : matching(prompts(), typed);
  if (!entries.length) return { entries, said: typed ? `No saved prompt named /${typed}` : "" };
  const count = entries.length === 1 ? "1 prompt" : `${entries.length} prompts`;
  return { entries, said: `${count}: up and down arrows to choose, Enter to insert` };
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

composerMenu({
  listId: "prompt-menu",
  statusId: "prompt-menu-status",
  optionPrefix: "prompt-option",
  key: (entry) => entry.name,
  find,
  option,
  choose(box, entry) {
    if (entry.variables.length) askVariables(box, entry);
    else insert(box, entry.text);
  },
});
