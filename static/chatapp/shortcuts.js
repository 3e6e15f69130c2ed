// The keyboard shortcuts (shortcut_keys.js says which key is which) and the dialog that lists
// them, opened by ? or by "Keyboard shortcuts" in the sidebar.
//
// composer.js is imported first so that its listeners come before these: on Esc in an edit
// that ↑ started, it has already left the edit when ours puts the focus back in the message box.

import "./composer.js";
import { SHORTCUTS, keyLabel, shortcutFor } from "./shortcut_keys.js";

const platform = navigator.userAgentData?.platform || navigator.platform || "";
const mac = /Mac|iPhone|iPad/.test(platform);
const phone = window.matchMedia("(max-width: 720px)");
const drawerOpen = () => document.querySelector(".layout")?.dataset.drawer === "open";

function typingIn(target) {
  return (
    target instanceof Element &&
    (target.matches("input, textarea, select") || target.closest("[contenteditable]") !== null)
  );
}

function newChat() {
  const link = document.querySelector("#sidebar a.new-chat");
  if (!link) return false;
  link.click();
  return true;
}

function focusSearch() {
  const search = document.getElementById("search");
  if (!search) return false;
  // Below 720 px the search is in the drawer: open it (sidebar.js) first.
  if (phone.matches && !drawerOpen()) document.querySelector("[data-drawer-open]")?.click();
  search.focus();
  search.select();
  return true;
}

let editedFromComposer = null; // the question ↑ put into its edit, whose Esc comes back here

function editLastQuestion() {
  const questions = document.querySelectorAll("#messages > article.message.user:not(.pending)");
  const last = questions[questions.length - 1];
  const edit = last?.querySelector(":scope > .message-footer button.edit");
  if (!edit || edit.disabled) return false;
  edit.click(); // composer.js opens the edit and puts the focus in it
  editedFromComposer = last;
  return true;
}

// --- The dialog ------------------------------------------------------------------------------

let dialog = null;

function keysOf(alternatives) {
  const cell = document.createElement("td");
  alternatives.forEach((keys, index) => {
    if (index > 0) cell.append(" or ");
    keys.forEach((key, at) => {
      if (at > 0) cell.append(mac ? "" : "+");
      const kbd = document.createElement("kbd");
      kbd.textContent = keyLabel(key, { mac });
      cell.append(kbd);
    });
  });
  return cell;
}

function shortcutsDialog() {
  if (dialog?.isConnected) return dialog;
  // The body was replaced (a boosted link, Back): a copy htmx put back has no listeners.
  for (const stale of document.querySelectorAll("dialog.shortcuts")) stale.remove();
  dialog = document.createElement("dialog");
  dialog.className = "shortcuts";
  dialog.setAttribute("aria-labelledby", "shortcuts-title");
  const title = document.createElement("h2");
  title.id = "shortcuts-title";
  title.textContent = "Keyboard shortcuts";
  const table = document.createElement("table");
  for (const shortcut of SHORTCUTS) {
    const row = table.insertRow();
    const label = document.createElement("th");
    label.scope = "row";
    label.textContent = shortcut.label;
    row.append(label, keysOf(shortcut.keys));
  }
  const close = document.createElement("button");
  close.type = "button";
  close.className = "shortcuts-close";
  close.textContent = "Close";
  dialog.append(title, table, close);
  dialog.addEventListener("click", (event) => {
    if (event.target === dialog || event.target === close) dialog.close();
  });
  document.body.append(dialog);
  return dialog;
}

function openShortcuts() {
  if (drawerOpen()) document.querySelector("[data-drawer-close]")?.click();
  const shown = shortcutsDialog();
  if (!shown.open) shown.showModal();
  return true;
}

// --- Keys ------------------------------------------------------------------------------------

const ACTIONS = {
  "new-chat": newChat,
  search: focusSearch,
  "edit-last": editLastQuestion,
  help: openShortcuts,
};

document.addEventListener("keydown", (event) => {
  if (event.defaultPrevented) return;
  const target = event.target;
  if (event.key === "Escape") {
    const article = editedFromComposer;
    editedFromComposer = null;
    // composer.js left the edit (its form is gone): back to where ↑ was pressed.
    if (article && target instanceof Element && target.closest(".edit-form")) {
      if (!article.querySelector(":scope > .edit-form")) document.getElementById("message")?.focus();
    }
    return;
  }
  if (document.querySelector("dialog[open]")) return; // the dialog's keys are its own
  const box = document.getElementById("message");
  const action = shortcutFor(event, {
    mac,
    typing: typingIn(target),
    emptyComposer: target === box && box.value === "",
  });
  if (action && ACTIONS[action]()) event.preventDefault();
});

document.addEventListener("click", (event) => {
  if (event.target instanceof Element && event.target.closest("[data-shortcuts-open]")) {
    openShortcuts();
  }
});
