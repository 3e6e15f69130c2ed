// The page's websocket protocol (see chatapp/ws_protocol.py) and the composer's keys.
//
// Each streaming answer keeps the `seq` of the last delta applied. Deltas at or below it are
// duplicates and dropped; one beyond the next means a gap: it is held back and a snapshot
// requested, which replaces the text so far. Model text only ever enters the page as text nodes;
// the final, sanitized HTML comes from the server once the answer is done.

const streams = new Map(); // generation id -> state of its element
const early = new Map(); // generation id -> messages that arrived before its element
let socket = null;
let watched = null; // the conversation this socket was last told to watch
let retryDelay = 250;
let reconnectTimer = null;

function streamFor(el) {
  const id = Number(el.dataset.generation);
  let st = streams.get(id);
  if (st && st.el === el) return st;
  st = { id, el, seq: Number(el.dataset.seq || 0), held: new Map(), askedAt: 0, done: false };
  streams.set(id, st);
  for (const msg of early.get(id) || []) handle(msg);
  early.delete(id);
  return st;
}

function registerAll(root) {
  const scope = root || document;
  const found = scope.querySelectorAll('article.assistant[data-status="streaming"]');
  for (const el of found) streamFor(el);
  if (scope.matches && scope.matches('article.assistant[data-status="streaming"]')) streamFor(scope);
}

function part(st, selector) {
  return st.el.querySelector(selector);
}

function appendText(node, text) {
  if (text) node.append(document.createTextNode(text));
}

function toolCallEl(st, index) {
  const pane = part(st, ".tool-calls-pane");
  pane.hidden = false;
  let call = pane.querySelector(`.tool-call[data-index="${Number(index)}"]`);
  if (!call) {
    call = document.createElement("div");
    call.className = "tool-call";
    call.dataset.index = String(Number(index));
    const name = document.createElement("code");
    name.className = "tool-name";
    const args = document.createElement("pre");
    args.className = "tool-args";
    call.append(name, args);
    pane.querySelector(".tool-calls").append(call);
  }
  return call;
}

function addCitation(st, annotation) {
  const list = part(st, ".citations");
  list.hidden = false;
  const li = document.createElement("li");
  const url = typeof annotation.url === "string" ? annotation.url : "";
  const title = annotation.title || url || "source";
  if (/^https?:\/\//i.test(url)) {
    const a = document.createElement("a");
    a.href = url;
    a.rel = "noopener nofollow";
    a.target = "_blank";
    a.textContent = title;
    li.append(a);
  } else {
    li.textContent = title;
  }
  list.append(li);
}

function addAttachmentNotes(st, kinds) {
  const box = part(st, ".attachments");
  for (const kind of kinds) {
    const note = document.createElement("span");
    note.className = "attachment-note";
    note.textContent = `${kind} received (shown when the answer is complete)`;
    box.append(note);
  }
}

function followingBottom() {
  const box = document.getElementById("messages");
  return box && box.scrollHeight - box.scrollTop - box.clientHeight < 80;
}

function scrollToBottom() {
  const box = document.getElementById("messages");
  if (box) box.scrollTop = box.scrollHeight;
}

function applyFields(st, msg) {
  const follow = followingBottom();
  applyParts(st, msg);
  if (follow) scrollToBottom();
}

function applyParts(st, msg) {
  if (msg.content) appendText(part(st, ".content"), msg.content);
  if (msg.reasoning) {
    // The pane is open while streaming (unless the user closed it); keep its end in view.
    part(st, ".reasoning-pane").hidden = false;
    const box = part(st, ".reasoning");
    const atEnd = box.scrollHeight - box.scrollTop - box.clientHeight < 24;
    appendText(box, msg.reasoning);
    if (atEnd) box.scrollTop = box.scrollHeight;
  }
  for (const call of msg.tool_calls || []) {
    const el = toolCallEl(st, call.index);
    if (call.name) el.querySelector(".tool-name").textContent = call.name;
    appendText(el.querySelector(".tool-args"), call.arguments);
  }
  for (const annotation of msg.annotations || []) addCitation(st, annotation);
  if (msg.attachments && msg.attachments.length) addAttachmentNotes(st, msg.attachments);
}

function drainHeld(st) {
  while (st.held.has(st.seq + 1)) {
    const next = st.held.get(st.seq + 1);
    st.held.delete(st.seq + 1);
    applyFields(st, next);
    st.seq = next.seq;
  }
  for (const seq of st.held.keys()) if (seq <= st.seq) st.held.delete(seq);
  if (st.held.size) askSnapshot(st);
}

function onDelta(st, msg) {
  if (msg.seq <= st.seq) return; // already have it
  if (msg.seq > st.seq + 1) {
    st.held.set(msg.seq, msg);
    askSnapshot(st);
    return;
  }
  applyFields(st, msg);
  st.seq = msg.seq;
  drainHeld(st);
}

function onSnapshot(st, msg) {
  st.askedAt = 0;
  st.snapAt = Date.now();
  if (msg.seq < st.seq) return;
  part(st, ".content").textContent = msg.content || "";
  part(st, ".reasoning").textContent = msg.reasoning || "";
  part(st, ".reasoning-pane").hidden = !msg.reasoning;
  part(st, ".tool-calls").textContent = "";
  part(st, ".tool-calls-pane").hidden = true;
  part(st, ".citations").textContent = "";
  part(st, ".citations").hidden = true;
  part(st, ".attachments").textContent = "";
  applyParts(st, { ...msg, content: "", reasoning: "" });
  st.seq = msg.seq;
  drainHeld(st);
}

function askSnapshot(st) {
  const now = Date.now();
  if (now - st.askedAt < 1000) return;
  st.askedAt = now;
  send({ t: "snapshot", g: st.id });
}

// The server's render of an answer is patched into its element rather than swapped in as a new
// one: a screen reader announces a live region's changes, not a new region's content. So the
// answer's `.content` (polite, busy while it streams) stays the same node and takes the final
// text as `aria-busy` goes, which is read once; an error already shown stays the same node too,
// so a later render (cost reconciled) announces neither again.
const latestRefresh = new WeakMap(); // element -> token of its newest fragment request

async function refresh(el) {
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
  if (fresh) patchAnswer(el, fresh);
  // The running totals this answer's cost changes come with it.
  for (const total of template.content.querySelectorAll("p.spend[id]")) {
    document.getElementById(total.id)?.replaceWith(total);
  }
}

function copyAttributes(el, from) {
  for (const name of el.getAttributeNames()) if (!from.hasAttribute(name)) el.removeAttribute(name);
  for (const name of from.getAttributeNames()) el.setAttribute(name, from.getAttribute(name));
}

function patchAnswer(el, fresh) {
  const follow = followingBottom();
  const keep = new Map(); // node of `fresh` -> the element's node that stays in its place
  const region = el.querySelector(":scope > .content");
  const nextRegion = fresh.querySelector(":scope > .content");
  if (region && nextRegion) {
    if (region.innerHTML !== nextRegion.innerHTML) region.replaceChildren(...nextRegion.childNodes);
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
  const st = streams.get(Number(el.dataset.generation));
  if (st && st.el === el) streams.delete(st.id); // a still-running render restarts from its seq
  registerAll(el);
  if (follow) scrollToBottom();
}

function onDone(st) {
  if (st.done) return;
  st.done = true;
  streams.delete(st.id);
  refresh(st.el);
}

function handle(msg) {
  if (msg.t === "watching" || msg.t === "gone") return; // about the conversation, not an answer
  const st = streams.get(msg.g);
  if (!st) {
    if (msg.t === "updated") {
      const el = document.querySelector(`article.assistant[data-generation="${Number(msg.g)}"]`);
      if (el) refresh(el);
      return;
    }
    const list = early.get(msg.g) || [];
    if (list.length < 2000) list.push(msg);
    early.set(msg.g, list);
    return;
  }
  switch (msg.t) {
    case "delta":
      onDelta(st, msg);
      break;
    case "snapshot":
      onSnapshot(st, msg);
      break;
    case "done":
      onDone(st);
      break;
    case "updated":
      refresh(st.el);
      break;
  }
}

function send(msg) {
  if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(msg));
}

// One socket per tab, opened with the page and kept across htmx swaps: the page tells it which
// conversation it shows, so a new conversation streams without a page load or a new socket.
function shownConversation() {
  const main = document.querySelector("main.chat[data-conversation]");
  return main ? Number(main.dataset.conversation) : null;
}

function watch() {
  const id = shownConversation();
  if (!socket || socket.readyState !== WebSocket.OPEN || id === null || id === watched) return;
  watched = id;
  const asked = Date.now();
  send({ t: "watch", c: id });
  // The server answers with snapshots of running answers; ask again for any it did not cover
  // (e.g. an answer that finished between the page render and the watch).
  setTimeout(() => {
    for (const st of streams.values()) if (!(st.snapAt >= asked) && !st.done) askSnapshot(st);
  }, 1000);
}

// A delta is a bare array, `[g, seq, content, reasoning?, extras?]` (chatapp/ws_protocol.py).
function deltaFrom(parts) {
  const msg = { t: "delta", g: parts[0], seq: parts[1], content: parts[2] || "" };
  if (parts[3]) msg.reasoning = parts[3];
  if (parts[4]) Object.assign(msg, parts[4]);
  return msg;
}

function connect() {
  const holder = document.querySelector("[data-socket-path]");
  if (socket || !holder) {
    watch();
    return;
  }
  clearTimeout(reconnectTimer);
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(`${scheme}//${location.host}${holder.dataset.socketPath}`);
  socket = ws;
  ws.onopen = () => {
    retryDelay = 250;
    document.body.dataset.socket = "open";
    watched = null;
    watch();
  };
  ws.onmessage = (event) => {
    let msg;
    try {
      msg = JSON.parse(event.data);
    } catch {
      return;
    }
    handle(Array.isArray(msg) ? deltaFrom(msg) : msg);
  };
  ws.onclose = () => {
    if (socket !== ws) return;
    socket = null;
    watched = null;
    document.body.dataset.socket = "closed";
    reconnectTimer = setTimeout(connect, retryDelay);
    retryDelay = Math.min(retryDelay * 2, 5000);
  };
}

// Test hook: drop the socket as a network failure would (the page reconnects by itself).
window.chatDropSocket = () => socket && socket.close();

function setupComposer() {
  const box = document.getElementById("message");
  if (!box || box.dataset.keys) return;
  box.dataset.keys = "1";
  box.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      if (box.value.trim()) box.form.requestSubmit();
    }
  });
}

function init(root) {
  if (root === document) scrollToBottom();
  streams.forEach((st, id) => {
    if (!st.el.isConnected) streams.delete(id);
  });
  registerAll(root);
  setupComposer();
  connect();
}

// Stop goes over the open socket at once (the fastest path to the worker); the button's htmx
// POST still follows, so Stop works while the socket is down. A second cancel is harmless.
document.addEventListener(
  "click",
  (event) => {
    const button = event.target.closest && event.target.closest("button.stop");
    const article = button && button.closest("article.assistant[data-generation]");
    if (article) send({ t: "stop", g: Number(article.dataset.generation) });
  },
  { capture: true },
);

document.addEventListener("DOMContentLoaded", () => init(document));
document.addEventListener("htmx:load", (event) => init(event.target));
document.addEventListener("htmx:afterRequest", (event) => {
  const form = event.target;
  const xhr = event.detail.xhr;
  if (form.id === "composer" && event.detail.successful && !xhr.getResponseHeader("HX-Retarget")) {
    form.querySelector("textarea").value = "";
  }
});
document.addEventListener("htmx:beforeRequest", (event) => {
  if (event.target.id === "composer") {
    const error = document.getElementById("composer-error");
    if (error) error.textContent = "";
  }
});
