// A settled ```mermaid block of an answer, drawn as a diagram, with a toggle to its source (its
// Copy copies the source either way).
//
// Mermaid runs in a sandboxed frame of its own (chatapp/views/code_frames.py), opened only once a
// page has a diagram: the frame loads Mermaid from our static files, draws each source the page
// posts with `securityLevel: "strict"` and posts back the SVG, which the page shows as an
// <img> (a picture: nothing in it runs or loads). Every draw is bounded: a source over
// MAX_SOURCE characters is not drawn, and a draw that does not answer within DRAW_MS has its
// frame removed (its work with it; the next diagram gets a new one). A source that does not
// parse stays shown as code under the parser's message. Mermaid's theme follows the page's.

import { codeOf, headButton, watchBlocks } from "./enhanced_blocks.js";

const MAX_SOURCE = 20_000; // characters
const READY_MS = 30_000; // for the frame to load Mermaid (5.7 MB of script) the first time
const DRAW_MS = 10_000;
const MAX_SVG = 4_000_000; // characters of the SVG the frame sends back
const frameUrl = document.querySelector('meta[name="chat-frames"]')?.dataset.diagram;

let drawer = null; // { frame, ready: Promise<boolean>, replies: Map(id -> resolve) }
let nextId = 1;
let queue = Promise.resolve(); // one draw at a time, so each one's deadline is its own
const drawings = new Map(); // `${theme}\n${source}` -> its result, so a redraw is immediate
const drawn = new Set(); // blocks showing a diagram, to draw again when the theme changes

window.addEventListener("message", (event) => {
  if (!drawer || event.source !== drawer.frame.contentWindow) return;
  const data = event.data || {};
  if (typeof data.ready === "boolean") drawer.onReady(data.ready);
  else drawer.replies.get(data.id)?.(data);
});

function openDrawer() {
  if (drawer?.frame.isConnected) return drawer;
  // One that htmx put back for Back, with the page it had copied: not ours, nor wanted.
  for (const stale of document.querySelectorAll("iframe.diagram-drawer")) stale.remove();
  const frame = document.createElement("iframe");
  frame.className = "diagram-drawer";
  frame.setAttribute("sandbox", "allow-scripts");
  frame.setAttribute("aria-hidden", "true");
  frame.tabIndex = -1;
  frame.title = "Diagram drawing";
  let onReady;
  const ready = new Promise((resolve) => (onReady = resolve));
  drawer = { frame, ready, onReady, replies: new Map() };
  frame.src = frameUrl;
  document.body.append(frame);
  return drawer;
}

function closeDrawer() {
  drawer?.frame.remove();
  drawer = null;
}

function within(promise, ms) {
  let timer;
  const late = new Promise((resolve) => (timer = setTimeout(() => resolve({ late: true }), ms)));
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

async function drawOnce(source, theme) {
  const { frame, ready, replies } = openDrawer();
  const started = await within(ready, READY_MS);
  if (started?.late) {
    closeDrawer();
    return { error: "The diagram drawer did not start in time." };
  }
  if (!started) return { unavailable: true };
  const id = nextId++;
  const reply = new Promise((resolve) => replies.set(id, resolve));
  frame.contentWindow.postMessage({ id, source, theme }, "*");
  const result = await within(reply, DRAW_MS);
  replies.delete(id);
  if (result.late) {
    closeDrawer();
    return { error: `It took longer than ${DRAW_MS / 1000} seconds to draw.` };
  }
  if (typeof result.error === "string") return { error: result.error };
  if (typeof result.svg !== "string" || result.svg.length > MAX_SVG) {
    return { error: "The diagram drawn was too large to show." };
  }
  return { svg: result.svg, title: typeof result.title === "string" ? result.title : "" };
}

function draw(source, theme) {
  const key = `${theme}\n${source}`;
  if (drawings.has(key)) return Promise.resolve(drawings.get(key));
  const result = queue.then(() => drawOnce(source, theme));
  queue = result.catch(() => {});
  return result.then((found) => {
    if (!found.unavailable) drawings.set(key, found);
    if (drawings.size > 100) drawings.delete(drawings.keys().next().value);
    return found;
  });
}

function pageTheme() {
  const theme = document.documentElement.dataset.theme;
  if (theme === "dark" || theme === "light") return theme === "dark" ? "dark" : "default";
  return matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "default";
}

function note(block, text, detail = "") {
  let el = block.querySelector(":scope > .diagram-note");
  if (!el) {
    el = document.createElement("div");
    el.className = "diagram-note";
    el.dataset.added = "";
    el.setAttribute("role", "status");
    block.append(el);
  }
  const words = document.createElement("p");
  words.textContent = text;
  el.replaceChildren(words);
  if (detail) {
    const message = document.createElement("pre");
    message.className = "diagram-error";
    message.textContent = detail;
    el.append(message);
  }
}

function showSource(block, yes) {
  const figure = block.querySelector(":scope > figure.diagram");
  const pre = block.querySelector(":scope > pre");
  const toggle = block.querySelector(":scope > .code-head .diagram-toggle");
  if (!figure || !pre || !toggle) return;
  figure.hidden = yes;
  pre.hidden = !yes;
  toggle.textContent = yes ? "Diagram" : "Source";
  toggle.setAttribute("aria-label", yes ? "Show the diagram" : "Show the diagram's source");
}

function showDiagram(block, { svg, title }) {
  let figure = block.querySelector(":scope > figure.diagram");
  if (!figure) {
    figure = document.createElement("figure");
    figure.className = "diagram";
    figure.dataset.added = "";
    figure.append(document.createElement("img"));
    block.querySelector(":scope > pre").before(figure);
    headButton(block, "diagram-toggle", "Source");
  }
  const img = figure.querySelector("img");
  img.alt = title ? `Diagram: ${title}` : "Diagram drawn from the Mermaid code";
  img.src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(svg)}`;
  block.querySelector(":scope > .diagram-note")?.remove();
  block.dataset.drawing = "drawn";
  drawn.add(block);
}

async function drawBlock(block, redraw = false) {
  const source = codeOf(block);
  if (source.length > MAX_SOURCE) {
    block.dataset.drawing = "failed";
    note(block, `Not drawn: a diagram of over ${MAX_SOURCE.toLocaleString("en")} characters is shown as code.`);
    return;
  }
  if (!redraw) block.dataset.drawing = "pending";
  const result = await draw(source, pageTheme());
  if (!block.isConnected) return;
  if (result.unavailable) {
    block.dataset.drawing = "unavailable";
    note(block, "Diagrams are not installed on this server: shown as code.");
  } else if (result.error) {
    block.dataset.drawing = "failed";
    drawn.delete(block);
    note(block, "This diagram could not be drawn:", result.error);
  } else {
    const first = !block.querySelector(":scope > figure.diagram");
    showDiagram(block, result);
    if (first) showSource(block, false);
  }
}

document.addEventListener("click", (event) => {
  const toggle = event.target.closest?.(".code-block[data-diagram] .diagram-toggle");
  if (!toggle) return;
  const block = toggle.closest(".code-block");
  showSource(block, block.querySelector(":scope > pre").hidden);
});

function redrawAll() {
  for (const block of [...drawn]) {
    if (block.isConnected) drawBlock(block, true);
    else drawn.delete(block);
  }
}

if (frameUrl) {
  watchBlocks(".code-block[data-diagram='mermaid']", (block) => drawBlock(block));
  new MutationObserver(redrawAll).observe(document.documentElement, {
    attributes: true,
    attributeFilter: ["data-theme"],
  });
  matchMedia("(prefers-color-scheme: dark)").addEventListener("change", redrawAll);
}
