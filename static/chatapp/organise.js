// Keeping many conversations in the sidebar (views/organising.py): select mode (check several,
// then archive or delete them), folders folded or open (the server remembers which), dragging a
// conversation onto a folder on a desktop, and fetching the sidebar again when another tab of the
// user changed it (the socket's `sidebar` push, relayed by chat.js as `chat:sidebar-changed`).
//
// Like sidebar.js, every listener is on the document and everything is looked up when used: the
// sidebar's conversations (#conversation-groups) are swapped whole after each change.

const byId = (id) => document.getElementById(id);
const GROUPS = "#conversation-groups";

// --- Select mode -----------------------------------------------------------------------------

function selecting() {
  return byId("sidebar")?.hasAttribute("data-selecting") ?? false;
}

function checked() {
  return document.querySelectorAll(`${GROUPS} .bulk-check:checked`);
}

function showCount() {
  const n = checked().length;
  const count = byId("bulk-count");
  if (count) count.textContent = n ? `${n} selected` : "None selected";
  for (const button of document.querySelectorAll("[data-bulk-action]")) button.disabled = n === 0;
}

function setSelecting(on, { focus = true } = {}) {
  const sidebar = byId("sidebar");
  if (!sidebar) return;
  sidebar.toggleAttribute("data-selecting", on);
  const bar = byId("bulk-bar");
  if (bar) bar.hidden = !on;
  for (const button of document.querySelectorAll("[data-select-toggle]")) {
    button.setAttribute("aria-pressed", String(on));
  }
  if (!on) for (const box of checked()) box.checked = false;
  showCount();
  if (focus) {
    const target = on ? document.querySelector(`${GROUPS} .bulk-check`) : document.querySelector(`${GROUPS} [data-select-toggle]`);
    target?.focus();
  }
}

document.addEventListener("click", (event) => {
  const target = event.target;
  if (!(target instanceof Element)) return;
  if (target.closest("[data-select-toggle]")) {
    setSelecting(!selecting());
    return;
  }
  const toggle = target.closest(".folder-toggle");
  if (toggle) foldFolder(toggle);
});

// In select mode a tap on a conversation checks it rather than opening it: captured, so that the
// link's own (boosted) click handler never sees it.
document.addEventListener(
  "click",
  (event) => {
    const link = event.target instanceof Element && event.target.closest(`${GROUPS} li[id^="conversation-item-"] > a`);
    if (!link || !selecting()) return;
    event.preventDefault();
    event.stopPropagation();
    const box = link.parentElement.querySelector(".bulk-check");
    if (box) box.checked = !box.checked;
    showCount();
  },
  true,
);

document.addEventListener("change", (event) => {
  if (event.target.matches?.(".bulk-check")) showCount();
});

// Done with the selection once it is archived or deleted. (The button is swapped out with the
// sidebar by then, so its own events reach no listener here: the request's end says when.)
document.addEventListener("htmx:beforeRequest", (event) => {
  if (!event.target.matches?.("[data-bulk-action]")) return;
  const xhr = event.detail.xhr;
  xhr.addEventListener("loadend", () => {
    if (xhr.status === 200) setSelecting(false, { focus: false });
  });
});

// --- Folders: folded or open ----------------------------------------------------------------

function foldFolder(toggle) {
  const open = toggle.getAttribute("aria-expanded") !== "true";
  toggle.setAttribute("aria-expanded", String(open));
  const list = byId(toggle.getAttribute("aria-controls"));
  if (list) list.hidden = !open;
  const values = { collapsed: open ? "0" : "1" };
  htmx.ajax("POST", toggle.dataset.collapseUrl, { source: toggle, swap: "none", values });
}

// --- Drag a conversation onto a folder (or out of folders) -----------------------------------

let dragged = null;

function dropZone(event) {
  const zone = event.target instanceof Element && event.target.closest(`${GROUPS} [data-drop-folder]`);
  if (!zone || !dragged || zone.contains(dragged)) return null;
  return zone;
}

function clearZones() {
  for (const zone of document.querySelectorAll(".drop-target")) zone.classList.remove("drop-target");
}

document.addEventListener("dragstart", (event) => {
  const item = event.target instanceof Element && event.target.closest(`${GROUPS} li[id^="conversation-item-"]`);
  if (!item || selecting()) return;
  dragged = item;
  event.dataTransfer.effectAllowed = "move";
  event.dataTransfer.setData("text/plain", item.querySelector("a")?.textContent ?? "");
});

document.addEventListener("dragover", (event) => {
  const zone = dropZone(event);
  if (!zone) return;
  event.preventDefault();
  event.dataTransfer.dropEffect = "move";
  if (!zone.classList.contains("drop-target")) {
    clearZones();
    zone.classList.add("drop-target");
  }
});

document.addEventListener("drop", (event) => {
  const zone = dropZone(event);
  const item = dragged;
  clearZones();
  if (!zone || !item) return;
  event.preventDefault();
  const url = item.querySelector(".item-move")?.getAttribute("hx-get");
  if (!url) return;
  htmx.ajax("POST", url, { source: item, swap: "none", values: { folder: zone.dataset.dropFolder } });
});

document.addEventListener("dragend", () => {
  dragged = null;
  clearZones();
});

// --- Another tab changed the sidebar ----------------------------------------------------------

// This tab's own changes come back with their response; the push for them is not fetched again.
let ownChangeAt = 0;
document.addEventListener("htmx:beforeRequest", (event) => {
  if (event.target.closest?.("#sidebar, main.chat")) ownChangeAt = Date.now();
});

document.addEventListener("chat:sidebar-changed", () => {
  const groups = document.querySelector(GROUPS);
  const url = byId("sidebar-tools")?.dataset.refreshUrl;
  // Not under a menu being used or a selection being made: it is fetched at the next change.
  if (!url || Date.now() - ownChangeAt < 2000 || selecting() || groups.querySelector("details[open]")) return;
  htmx.ajax("GET", url, { source: groups, target: GROUPS, swap: "outerHTML" });
});

// The sidebar swapped whole: select mode's bar and count follow the page's state.
document.addEventListener("htmx:afterSettle", () => {
  const bar = byId("bulk-bar");
  if (bar && bar.hidden === selecting()) {
    bar.hidden = !selecting();
    showCount();
  }
});
