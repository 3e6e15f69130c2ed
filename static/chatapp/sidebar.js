// The sidebar: a drawer below 720 px, its search, and its entries' menus; Esc for those and for
// the header's menus (Settings, More), and a click outside for More; and the keyboard's focus,
// which is in the message box on every page load and after sending.
//
// Everything is looked up when used and every listener is on the document: htmx swaps the chat
// (a new conversation replaces `main.chat`), the sidebar's list (rename) and, on a boosted link,
// the whole body. The drawer's state is the page's (`.layout[data-drawer]`), so a new page starts
// with it closed.

const phone = window.matchMedia("(max-width: 720px)");
const byId = (id) => document.getElementById(id);
const layout = () => document.querySelector(".layout");
const menuButton = () => document.querySelector("[data-drawer-open]");

// --- The drawer -----------------------------------------------------------------------------

function drawerOpen() {
  return layout()?.dataset.drawer === "open";
}

function setDrawer(open, { returnFocus = true } = {}) {
  const page = layout();
  const button = menuButton();
  const sidebar = byId("sidebar");
  if (!page || !button || !sidebar || open === drawerOpen()) return;
  if (open) page.dataset.drawer = "open";
  else delete page.dataset.drawer;
  button.setAttribute("aria-expanded", String(open));
  // While it is open the drawer is all there is: the chat under it takes no focus or clicks.
  // The ☰ button too: it lies under the open drawer, and Shift+Tab from its first control found it.
  const chat = document.querySelector("main.chat");
  if (chat) chat.inert = open;
  button.inert = open;
  if (open) sidebar.querySelector("[data-drawer-close]")?.focus();
  else if (returnFocus) button.focus();
}

// The menus a click outside closes: an entry's, and the header's More. (Settings stays open: it
// is a form being filled in, closed by Save, Esc or its own button.)
const POPOVERS = ":is(details.item-menu, details.new-folder, details.conversation-actions)[open]";

document.addEventListener("click", (event) => {
  const target = event.target;
  if (!(target instanceof Element)) return;
  if (target.closest("[data-drawer-open]")) {
    setDrawer(!drawerOpen());
    return;
  }
  if (target.closest("[data-drawer-close]")) {
    setDrawer(false);
    return;
  }
  if (drawerOpen() && !target.closest("#sidebar")) setDrawer(false);
  for (const menu of document.querySelectorAll(POPOVERS)) {
    if (!menu.contains(target)) menu.open = false;
  }
});

phone.addEventListener("change", () => {
  if (!phone.matches) setDrawer(false, { returnFocus: false });
});

// --- Esc: a menu, then the search, then the drawer -------------------------------------------

const MENUS =
  ":is(details.item-menu, details.new-folder, details.settings-menu, details.conversation-actions)[open]";

// The open menu Esc closes: the one holding the focus, else the header's (its panel lies over the
// messages wherever the focus went) unless the drawer is over it.
function escapedMenu(target) {
  const inside = target instanceof Element && target.closest(MENUS);
  if (inside || drawerOpen()) return inside;
  return document.querySelector(`.chat-header ${MENUS}`);
}

function onEscape(event) {
  if (event.key !== "Escape" || event.defaultPrevented) return;
  const menu = escapedMenu(event.target);
  const search = byId("search");
  if (menu) {
    const focus = document.activeElement;
    menu.open = false;
    // Back to the button that opened it; a focus elsewhere (the message box) stays there.
    if (menu.contains(focus) || focus === document.body) menu.querySelector("summary").focus();
  } else if (search && event.target === search && search.value) {
    search.value = "";
    search.dispatchEvent(new Event("input", { bubbles: true }));
  } else if (drawerOpen()) {
    setDrawer(false);
  } else {
    return;
  }
  event.preventDefault();
}
// Captured, so that an Esc used here is not also the composer's (which stops the answer).
document.addEventListener("keydown", onEscape, true);

// The header's panels (Settings, More) lie over the messages: when the keyboard's focus leaves
// one for something else on the page, it closes (its form keeps what was typed). A focus that
// goes nowhere (a click on empty space, another window) leaves it as it is.
document.addEventListener("focusout", (event) => {
  const menu = event.target instanceof Element && event.target.closest(`.chat-header ${MENUS}`);
  const next = event.relatedTarget;
  if (menu && next instanceof Element && !menu.contains(next)) menu.open = false;
});

// --- Search: its results take the list's place while the box holds a query -----------------

function showSearching() {
  const sidebar = byId("sidebar");
  const search = byId("search");
  const results = byId("search-results");
  if (!sidebar || !search || !results) return;
  const searching = search.value.trim() !== "";
  sidebar.toggleAttribute("data-searching", searching);
  results.hidden = !searching;
}

document.addEventListener("input", (event) => {
  if (event.target.id === "search" && !event.target.value.trim()) showSearching();
});
// A late answer for an older query is shown only while the box still holds one.
document.addEventListener("htmx:afterSwap", (event) => {
  if (event.target.id === "search-results") showSearching();
});

// A boosted link to a conversation gone since the list was drawn (deleted in another tab) gets
// our 404 page, which says so and leads back: htmx swaps no 4xx by itself, so the click would
// otherwise do nothing at all.
document.addEventListener("htmx:beforeSwap", (event) => {
  if (event.detail.boosted && event.detail.xhr.status === 404) {
    event.detail.shouldSwap = true;
    event.detail.isError = false;
  }
});

// --- An entry's menu: one open at a time, its name ready to edit ------------------------------

// Opened by a finger, the menu does not focus its name field: the touch keyboard would rise over
// the menu each time, for what is most often Pin, Move or Delete.
let lastPointer = "";
document.addEventListener("pointerdown", (event) => (lastPointer = event.pointerType), true);
document.addEventListener("keydown", () => (lastPointer = ""), true);

function byTouch() {
  return lastPointer === "touch" || matchMedia("(hover: none) and (pointer: coarse)").matches;
}

document.addEventListener(
  "toggle",
  (event) => {
    const menu = event.target;
    if (!(menu instanceof HTMLDetailsElement) || !menu.matches(".item-menu, .new-folder") || !menu.open) return;
    for (const other of document.querySelectorAll("details:is(.item-menu, .new-folder)[open]")) {
      if (other !== menu) other.open = false;
    }
    const input = menu.querySelector("input[name=title], input[name=name]");
    if (!byTouch() || menu.matches(".new-folder")) {
      input?.focus();
      input?.select();
    }
    menu.querySelector(".item-menu-panel")?.scrollIntoView({ block: "nearest" });
  },
  true, // `toggle` does not bubble
);

// The "Move to" list arrives after the menu opened and makes it taller: its end (Delete) is
// brought into view again, rather than left under the sidebar's footer.
document.addEventListener("htmx:afterSettle", (event) => {
  const panel = event.target.closest?.("details.item-menu[open] .item-menu-panel");
  if (panel && event.target.matches(".item-move")) panel.scrollIntoView({ block: "nearest" });
});

// After a rename or delete from an entry's menu, focus goes to that entry, or to the next one.
// (The menu is gone by then, swapped out or deleted with its entry: the request's end says when.)
// A GET changes nothing (the "Move to" list loading as the menu opens): the focus stays put.
document.addEventListener("htmx:beforeRequest", (event) => {
  const item = event.target.closest?.(".item-menu")?.closest("li");
  if (!item || event.detail.requestConfig?.verb === "get") return;
  // A rename, pin or move keeps the entry (wherever it went); a delete or archive, the next.
  const renamed = event.target.matches("form.item-rename, [data-keeps-focus]");
  const next = renamed ? item : item.nextElementSibling || item.previousElementSibling;
  const id = next?.querySelector("a")?.id;
  if (id) event.detail.xhr.addEventListener("loadend", () => byId(id)?.focus());
});

// --- Focus: the message box, once the page or a new chat is in place, and after sending ------

function focusComposer() {
  const box = byId("message");
  if (!box || box.disabled || drawerOpen() || document.activeElement === box) return;
  box.focus({ preventScroll: true });
}

document.addEventListener("htmx:load", (event) => {
  // The page itself, a boosted page (the body) or a new conversation (`main.chat`).
  const root = event.target;
  if (root.id === "message" || root.querySelector?.("#message")) focusComposer();
});

document.addEventListener("htmx:afterRequest", (event) => {
  if (event.target.id === "composer") focusComposer();
});

// --- The first screen names the model that will answer, and the picker its gateway ----------

document.addEventListener("change", (event) => {
  if (event.target.id !== "model") return;
  const option = event.target.selectedOptions[0];
  if (!option) return;
  const name = document.querySelector("[data-selected-model]");
  if (name) name.textContent = option.textContent.trim();
  // Only where several gateways are offered does an option name its own (`data-gateway`).
  const gateway = option.dataset.gateway;
  for (const line of document.querySelectorAll("[data-selected-gateway]")) {
    line.textContent = gateway ? `on ${gateway}` : "";
  }
});

focusComposer();
