// The focus a re-render takes away is put back. A message's controls are re-rendered under the
// person using them: a thumb swaps its feedback block, an answer's final render and its cost
// reconciliation replace its footer (final_patch.js). The browser then drops the focus to the
// body, and the next Tab starts from the top of the page. So when the element last focused in a
// message leaves the page with the focus, the same control in that message's new render takes it
// (the same tag and classes: "button.thumb.thumb-up"), or else the message itself. A message
// replaced by a new version (Regenerate, Retry, Continue, Edit) is composer.js's to focus.

let last = null; // {el, article: the id of its message, key: a selector for its twin}

function keyOf(el) {
  if (!el.matches("button, a, summary, textarea, input, select")) return null;
  return el.localName + [...el.classList].map((name) => `.${CSS.escape(name)}`).join("");
}

document.addEventListener("focusin", (event) => {
  const el = event.target;
  const article = el instanceof Element ? el.closest("article.message[id]") : null;
  last = article ? { el, article: article.id, key: keyOf(el) } : null;
});

function focusLost() {
  const active = document.activeElement;
  return !active || active === document.body;
}

// An htmx swap's new content is wired (hx-post and the like) only when it settles, a moment
// after it enters the page: a twin focused before that would take an Enter as a plain form
// submission and reload the page. So a swap's lost focus is put back when it has settled.
let settling = false;
document.addEventListener("htmx:afterSwap", () => {
  settling = true;
});
document.addEventListener("htmx:afterSettle", () => {
  settling = false;
  restore();
});

function restore() {
  if (!last || last.el.isConnected || !focusLost()) return;
  const article = document.getElementById(last.article);
  if (!article) return;
  const twins = last.key ? [...article.querySelectorAll(last.key)] : [];
  const twin = twins.find((el) => !el.disabled && el.getClientRects().length);
  (twin || article).focus({ preventScroll: true });
}

new MutationObserver(() => {
  if (!settling) restore();
}).observe(document.documentElement, { childList: true, subtree: true });

export { focusLost };
