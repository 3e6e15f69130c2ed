// A streaming answer as the page draws it: the effects of stream_state.js carried out on its
// element. Model text enters the page as text nodes, or as the server's sanitized HTML of its
// settled blocks (chatapp/streaming/live_blocks.py), which take the place of the start of the
// unsettled tail; the tail is shown as text (as code when it opens a fence). What deltas carry
// beside the text goes into its panes (answer_panes.js); the page follows the end as it grows
// (follow_end.js).

import { appendParts, appendText, part, showThinking } from "./answer_panes.js";
import { followingBottom, scrollToBottom } from "./follow_end.js";
import { placeTail, writtenCell } from "./tail_text.js";

// One answer's element and what it shows; `tail` is the text the tail element holds.
export function createView(el, tail) {
  return {
    el,
    tail,
    tailEl: null,
    tailOpened: false,
    lastActivity: Date.now(),
    thinkStart: null,
    thinkEnd: null,
    writing: undefined,
    drafted: 0, // UTF-16 units at the start of `tail` that the draft shows in their place
    draftNodes: [], // the nodes the draft put in the page
    draftHidden: null, // the open block a draft in its place ("=") hides
    tailHost: null, // the draft's last block, which the text after the draft runs on in
    tailRoom: true, // false: that block is a row without the cell the text is written in yet
  };
}

// --- The content: settled blocks, then the tail ------------------------------------------------

// The unsettled tail, shown as text: as code when it opens a fence, so code streams looking like
// code (it is highlighted once its fence closes and the block settles).
const FENCE_OPEN = /^ {0,3}(`{3,}|~{3,})[ \t]*([^\s`]*)[^\n]*\n/;

// The text the draft's last block holds after it (`placeTail`'s `inline`), as a span in it.
function drawRun(box, host, text) {
  let el = box.querySelector("span.live-tail");
  if (el && (!text || el.parentElement !== host)) {
    el.remove();
    el = null;
  }
  if (!text) return null;
  if (!el) {
    el = document.createElement("span");
    el.className = "live-tail";
    host.append(el);
  }
  el.textContent = text;
  return el;
}

// Whether `host` is a table cell with no text of its own yet: the text that goes on in it is
// the cell's first, whose leading spaces a rendered cell does not show.
function startsCell(host) {
  if (!host || !/^T[DH]$/.test(host.tagName)) return false;
  const own = [...host.childNodes].filter((node) => !node.classList?.contains("live-tail"));
  return own.every((node) => !node.textContent.trim());
}

export function drawTail(view) {
  const box = part(view, ".content");
  const host = view.tailHost && view.tailHost.isConnected ? view.tailHost : null;
  const { inline, below, runsOn } = placeTail(view.tail, view.drafted, host?.tagName, view.tailRoom);
  const run = drawRun(box, host, startsCell(host) ? inline.trimStart() : inline);
  let el = box.querySelector(":scope > .live-tail");
  if (!below) {
    el?.remove();
    view.tailOpened = false;
    view.tailEl = runsOn ? run : null; // else new text places the tail again
    return;
  }
  if (!el) {
    el = document.createElement("div");
    box.append(el);
  }
  const fence = FENCE_OPEN.exec(below);
  view.tailOpened = below.includes("\n"); // its first line, which says what it is, is complete
  if (fence) {
    el.className = "live-tail code-block";
    const head = document.createElement("div");
    head.className = "code-head";
    const label = document.createElement("span");
    label.className = "code-lang";
    label.textContent = fence[2];
    head.append(label);
    const pre = document.createElement("pre");
    const code = document.createElement("code");
    code.textContent = below.slice(fence[0].length);
    pre.append(code);
    el.replaceChildren(head, pre);
    view.tailEl = code;
  } else {
    el.className = "live-tail";
    el.textContent = below;
    view.tailEl = el;
  }
}

function appendTail(view, text) {
  view.tail += text;
  if (!view.tailEl || (!view.tailOpened && /[\r\n]/.test(text))) drawTail(view);
  else appendText(view.tailEl, text);
}

function fragment(html) {
  const template = document.createElement("template");
  template.innerHTML = html;
  return template.content;
}

function joinTarget(box, tail, join) {
  let el = tail ? tail.previousElementSibling : box.lastElementChild;
  if (!el || join === "=") return el;
  if (join === "tbody") el = el.tBodies ? el.tBodies[el.tBodies.length - 1] : null;
  return el && el.localName === join ? el : null;
}

// A `settle` of stream_state.js: its `joined` part goes into the element of the block still open
// (or replaces it, "="), its `rest` follows. False when the open block is not `join`'s.
export function settleInto(view, settle) {
  const box = part(view, ".content");
  const tail = box.querySelector(":scope > .live-tail");
  if (settle.join) {
    const target = joinTarget(box, tail, settle.join);
    if (!target) return false;
    const joined = fragment(settle.joined);
    if (settle.join === "=") target.replaceWith(joined);
    else {
      target.append(joined);
      if (settle.join === "table") target.append("\n"); // as `</tbody>\n</table>` has it
      if (settle.join === "p") target.normalize(); // one text node across the lines, as rendered
    }
  }
  box.insertBefore(fragment(settle.rest), tail);
  view.tail = view.tail.slice(settle.end - settle.start);
  drawTail(view);
  return true;
}

// A draft of stream_state.js: the start of the tail rendered as it would settle now, placed as a
// settle is but kept apart (its nodes are remembered), so that `clearDraft` takes it out before
// the next settle or draft goes in. False when the open block is not `join`'s: the text stays.
const draftNodes = new WeakSet(); // every node a draft placed: not yet the answer's (`isDraft`)

// Whether `node` is one a draft placed, which the next settle or draft takes out.
export function isDraft(node) {
  return draftNodes.has(node);
}

export function showDraft(view, draft) {
  clearDraft(view);
  const box = part(view, ".content");
  const tail = box.querySelector(":scope > .live-tail");
  const nodes = [];
  const place = (html, parent, before) => {
    const found = fragment(html);
    nodes.push(...found.childNodes);
    for (const node of found.childNodes) draftNodes.add(node);
    parent.insertBefore(found, before);
  };
  if (draft.join) {
    const target = joinTarget(box, tail, draft.join);
    if (!target) return false;
    if (draft.join === "=") {
      target.hidden = true;
      view.draftHidden = target;
      place(draft.joined, box, target.nextSibling);
    } else {
      place(draft.joined, target, null);
    }
  }
  place(draft.rest, box, tail);
  view.draftNodes = nodes;
  view.drafted = draft.end - draft.start;
  placeAfterDraft(view, lastBlock(nodes));
  drawTail(view);
  return true;
}

// Where the text after the draft goes on: in its last block or, when that is a table cell, in
// the cell of the row that the text is written in (`writtenCell`), which may be none yet.
function placeAfterDraft(view, block) {
  view.tailHost = block;
  view.tailRoom = true;
  if (!block || !/^T[DH]$/.test(block.tagName)) return;
  const cells = block.parentElement.cells;
  const column = writtenCell(view.tail.slice(0, view.drafted), block.tagName === "TH");
  view.tailRoom = column >= 0 && column < cells.length;
  if (view.tailRoom) view.tailHost = cells[column];
}

// The block of `nodes` that text written after them continues: their last paragraph, heading,
// list item or table cell, so that new text runs on in it rather than below it until the next
// draft takes it in (which would move it).
const CONTAINERS = new Set(["UL", "OL", "BLOCKQUOTE", "TABLE", "THEAD", "TBODY", "TR"]);
function lastBlock(nodes) {
  let el = [...nodes].reverse().find((node) => node instanceof Element) || null;
  const holdsBlocks = (li) => li.querySelector(":scope > p, :scope > ul, :scope > ol") !== null;
  while (el && (CONTAINERS.has(el.tagName) || (el.tagName === "LI" && holdsBlocks(el)))) {
    el = el.lastElementChild;
  }
  return el && /^(P|H[1-6]|LI|TD|TH)$/.test(el.tagName) ? el : null;
}

export function clearDraft(view) {
  if (!view.drafted && !view.draftNodes.length) return;
  for (const node of view.draftNodes) node.remove();
  if (view.draftHidden) view.draftHidden.hidden = false;
  view.draftNodes = [];
  view.draftHidden = null;
  view.drafted = 0;
  view.tailHost = null;
  view.tailRoom = true;
  drawTail(view);
}

// --- A delta, a snapshot ----------------------------------------------------------------------

// A delta's text, before its settled blocks go in (`settleInto`).
export function appendContent(view, delta) {
  view.lastActivity = Date.now();
  if (!delta.content) return;
  appendTail(view, delta.content);
  if (view.thinkStart !== null && view.thinkEnd === null) {
    view.thinkEnd = Date.now(); // the answer began: the thinking is over
    showThinking(view);
    // The pane folds now, as the final render shows it, rather than at the end, which would
    // move the whole answer up; a reader who opens it again keeps it open (final_patch.js).
    const pane = part(view, ".reasoning-pane");
    if (pane) pane.open = false;
  }
}

// A snapshot replaces what the answer shows so far; `tail` is its content after its settled HTML.
export function replaceWith(view, snapshot, tail, draft) {
  const follow = followingBottom();
  const [, , html] = snapshot.settled || [0, 0, ""];
  part(view, ".content").replaceChildren(fragment(html));
  view.draftNodes = [];
  view.draftHidden = null;
  view.drafted = 0;
  view.tailHost = null;
  view.tailRoom = true;
  view.tail = tail;
  drawTail(view);
  if (draft) showDraft(view, draft);
  part(view, ".reasoning").textContent = snapshot.reasoning || "";
  part(view, ".reasoning-pane").hidden = !snapshot.reasoning;
  if (snapshot.thinking) {
    const [ms, over] = snapshot.thinking;
    view.thinkStart = Date.now() - ms;
    view.thinkEnd = over ? Date.now() : null;
    showThinking(view);
  }
  part(view, ".tool-calls").textContent = "";
  part(view, ".tool-calls-pane").hidden = true;
  part(view, ".citations").textContent = "";
  part(view, ".citations").hidden = true;
  // An image generation's figures stay: the snapshot's previews go into them by index, so a
  // picture is replaced in place, never removed and drawn again.
  for (const child of [...part(view, ".attachments").childNodes]) {
    if (!(child instanceof Element && child.matches("figure.generated-image[data-index]"))) {
      child.remove();
    }
  }
  view.lastActivity = Date.now();
  appendParts(view, { ...snapshot, content: "", reasoning: "" });
  if (follow) scrollToBottom();
}
