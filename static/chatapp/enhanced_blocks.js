// Code blocks the page adds to (a diagram drawn from one, a Preview button on another): found as
// they arrive, and remembered as the server rendered them.
//
// A block is taken as it settles, in a live answer or a final render or a page load alike (a
// MutationObserver, scanned once per frame): never in a draft (live_render.js), whose block may
// still change, nor the open fence a stream shows as code. `sameBlock` lets final_patch.js keep
// a block the page changed when the final render brings it unchanged, rather than draw it again.
// What the page adds to a block is marked `data-added`: a block that htmx puts back for Back
// (its copy of the page holds the additions) is made as it arrived before it is taken again.

import { isDraft } from "./live_render.js";

const originals = new WeakMap(); // block -> a copy of it as it arrived

export function sameBlock(shown, fresh) {
  return (originals.get(shown) || shown).isEqualNode(fresh);
}

// The block's code as written (its text ends with the newline before the closing fence).
export function codeOf(block) {
  return (block.querySelector(":scope > pre code")?.textContent || "").replace(/\n$/, "");
}

// A button for the block's head, before its Copy.
export function headButton(block, className, label) {
  const button = document.createElement("button");
  button.type = "button";
  button.className = className;
  button.textContent = label;
  button.dataset.added = "";
  const head = block.querySelector(":scope > .code-head");
  head?.insertBefore(button, head.querySelector(".copy-code"));
  return button;
}

// Calls `take(block)` once for each settled block that matches `selector`, now and as they come.
export function watchBlocks(selector, take) {
  let scheduled = false;
  const scan = () => {
    scheduled = false;
    for (const block of document.querySelectorAll(selector)) {
      if (originals.has(block) || inDraft(block)) continue;
      asArrived(block);
      originals.set(block, block.cloneNode(true));
      take(block);
    }
  };
  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    requestAnimationFrame(scan);
  };
  new MutationObserver(schedule).observe(document.documentElement, {
    childList: true,
    subtree: true,
  });
  schedule();
}

function asArrived(block) {
  for (const added of block.querySelectorAll("[data-added]")) added.remove();
  const pre = block.querySelector(":scope > pre");
  if (pre) pre.hidden = false;
  for (const name of Object.keys(block.dataset)) {
    if (name !== "diagram" && name !== "preview") delete block.dataset[name];
  }
}

function inDraft(block) {
  for (let node = block; node; node = node.parentElement) if (isDraft(node)) return true;
  return false;
}
