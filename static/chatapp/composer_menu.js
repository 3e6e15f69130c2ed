// A listbox under the message box offering what is typed in it: the saved prompts of a "/name"
// (prompts.js) and the collections and files of a "#name" (knowledge_menu.js). The box is its
// combobox: arrows move, Enter chooses, Esc closes, a click chooses, and Tab moves on as anywhere
// else, closing it. One menu is open at a time; the box's aria-controls names it.
//
// `composerMenu(spec)` makes one: `spec.listId` and `spec.statusId` are its listbox and its
// status line, `spec.optionPrefix` its options' ids; `spec.find(box)` says what the box asks
// for ({entries, said} or null: not asking), `spec.option(entry)` the nodes of one option, and
// `spec.choose(box, entry)` does what choosing it does. It returns `update(box)`, for a menu
// whose entries arrive later (a fetch) to show them once they have.

const MESSAGE_BOX = "message";
let open = null; // the menu shown: {spec, box, entries, active}

function say(spec, text) {
  const status = document.getElementById(spec.statusId);
  if (status && status.textContent !== text) status.textContent = text;
}

function close() {
  if (!open) return;
  const { spec, box } = open;
  open = null;
  const element = document.getElementById(spec.listId);
  if (element) {
    element.hidden = true;
    element.replaceChildren();
  }
  box.removeAttribute("aria-activedescendant");
  box.setAttribute("aria-expanded", "false");
}

function render() {
  const element = document.getElementById(open.spec.listId);
  if (!element) return;
  const { spec, box, entries, active } = open;
  element.replaceChildren(
    ...entries.map((entry, index) => {
      const option = document.createElement("li");
      option.id = `${spec.optionPrefix}-${index}`;
      option.setAttribute("role", "option");
      option.setAttribute("aria-selected", String(index === active));
      option.dataset.index = String(index);
      option.append(...spec.option(entry));
      return option;
    }),
  );
  element.hidden = false;
  box.setAttribute("aria-controls", spec.listId);
  box.setAttribute("aria-expanded", "true");
  box.setAttribute("aria-activedescendant", `${spec.optionPrefix}-${active}`);
  element.querySelector('[aria-selected="true"]')?.scrollIntoView({ block: "nearest" });
}

function choose(index) {
  if (!open) return;
  const { spec, box, entries } = open;
  const entry = entries[index];
  close();
  say(spec, "");
  if (entry) spec.choose(box, entry);
}

const menus = [];

function update(spec, box) {
  const found = spec.find(box);
  if (!found || !found.entries.length) {
    if (open?.spec === spec) close();
    if (!open || open.spec === spec) say(spec, found?.said ?? "");
    return;
  }
  // The option chosen stays chosen while the list narrows around it.
  const before = open?.spec === spec ? open.entries[open.active] : undefined;
  const key = spec.key ?? ((entry) => entry);
  const kept = before === undefined ? -1 : found.entries.findIndex((e) => key(e) === key(before));
  if (open && open.spec !== spec) close();
  open = { spec, box, entries: found.entries, active: Math.max(kept, 0) };
  render();
  say(spec, found.said);
}

export function composerMenu(spec) {
  menus.push(spec);
  return (box) => update(spec, box);
}

document.addEventListener("input", (event) => {
  if (event.target?.id !== MESSAGE_BOX) return;
  for (const spec of menus) update(spec, event.target);
});

// Capturing, so that Enter chooses rather than sends the message (composer.js).
document.addEventListener(
  "keydown",
  (event) => {
    if (!open || event.target !== open.box || event.isComposing) return;
    const keys = {
      ArrowDown: () => {
        open.active = (open.active + 1) % open.entries.length;
        render();
      },
      ArrowUp: () => {
        open.active = (open.active - 1 + open.entries.length) % open.entries.length;
        render();
      },
      Enter: () => choose(open.active),
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
  const option = open && event.target.closest?.(`#${open.spec.listId} [role=option]`);
  if (option) {
    event.preventDefault(); // the box keeps its focus
    choose(Number(option.dataset.index));
  } else if (open && event.target !== open.box) close();
});

document.addEventListener("focusout", (event) => {
  if (open && event.target === open.box) close();
});
