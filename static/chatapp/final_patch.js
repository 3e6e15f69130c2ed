// An answer's final render, patched into its element rather than swapped in as a new one: the
// answer's `.content` stays the same node (what the reader is on, selected or focused stays), and
// an error already shown stays the same node too, so a later render (cost reconciled) does not
// announce its alert again.

import { sameBlock } from "./enhanced_blocks.js";
import { followingBottom, scrollToBottom } from "./follow_end.js";

const latestRefresh = new WeakMap(); // element -> token of its newest fragment request

// Fetch `el`'s render and patch it in; `onPatched(el)` then, before the page scrolls to follow.
export async function refresh(el, onPatched) {
  const url = el.dataset.fragmentUrl;
  if (!url) return;
  const token = {};
  latestRefresh.set(el, token);
  let html;
  try {
    const response = await fetch(url, { headers: { "HX-Request": "true" } });
    if (!response.ok) return;
    html = await response.text();
  } catch {
    return;
  }
  if (latestRefresh.get(el) !== token || !el.isConnected) return;
  const template = document.createElement("template");
  template.innerHTML = html;
  const fresh = template.content.querySelector("article.assistant");
  if (fresh) patchAnswer(el, fresh, onPatched);
  // The running totals this answer's cost changes come with it.
  for (const total of template.content.querySelectorAll("p.spend[id]")) {
    document.getElementById(total.id)?.replaceWith(total);
  }
}

function copyAttributes(el, from) {
  for (const name of el.getAttributeNames()) if (!from.hasAttribute(name)) el.removeAttribute(name);
  for (const name of from.getAttributeNames()) el.setAttribute(name, from.getAttribute(name));
}

// The live blocks are the final render's (the same server renderer): only a block that differs
// (markdown that reaches across blocks, such as a footnote) is replaced, so nothing else moves.
function patchChildren(region, next) {
  if (region.innerHTML === next.innerHTML) return;
  const old = [...region.childNodes];
  const fresh = [...next.childNodes];
  fresh.forEach((node, i) => {
    if (i < old.length && sameBlock(old[i], node)) return; // a drawn diagram stays drawn
    if (i < old.length) old[i].replaceWith(node);
    else region.append(node);
  });
  for (const node of old.slice(fresh.length)) node.remove();
}

function patchAnswer(el, fresh, onPatched) {
  const follow = followingBottom();
  // The reasoning pane stays as the reader left it: folding or unfolding it would move the answer.
  const pane = el.querySelector(":scope > .reasoning-pane");
  const nextPane = fresh.querySelector(":scope > .reasoning-pane");
  if (pane && nextPane && !nextPane.hidden) nextPane.open = pane.open;
  const keep = new Map(); // node of `fresh` -> the element's node that stays in its place
  const region = el.querySelector(":scope > .content");
  const nextRegion = fresh.querySelector(":scope > .content");
  if (region && nextRegion) {
    patchChildren(region, nextRegion);
    copyAttributes(region, nextRegion);
    keep.set(nextRegion, region);
  }
  const error = el.querySelector(":scope > .error");
  const nextError = fresh.querySelector(":scope > .error");
  if (error && nextError && error.textContent === nextError.textContent) keep.set(nextError, error);
  // Both renders come from one template, so the kept nodes are in the same order in each.
  const kept = new Set(keep.values());
  for (const node of [...el.childNodes]) if (!kept.has(node)) node.remove();
  let anchor = el.firstChild;
  for (const node of [...fresh.childNodes]) {
    if (keep.has(node)) anchor = keep.get(node).nextSibling;
    else el.insertBefore(node, anchor);
  }
  copyAttributes(el, fresh);
  if (window.htmx) window.htmx.process(el);
  onPatched(el);
  if (follow) scrollToBottom();
}
