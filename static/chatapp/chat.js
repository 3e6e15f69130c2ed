// The conversation websocket protocol (see chatapp/protocol.py) and the composer's keys.
//
// Each streaming answer keeps the `seq` of the last delta applied. Deltas at or below it are
// duplicates and dropped; one beyond the next means a gap: it is held back and a snapshot
// requested, which replaces the text so far. Model text only ever enters the page as text nodes;
// the final, sanitized HTML comes from the server once the answer is done.

const streams = new Map(); // generation id -> state of its element
const early = new Map(); // generation id -> messages that arrived before its element
let socket = null;
let socketPath = null;
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

function refresh(st) {
  const url = st.el.dataset.fragmentUrl;
  if (!url || !window.htmx) return;
  window.htmx.ajax("GET", url, { target: st.el, swap: "outerHTML" });
}

function onDone(st) {
  if (st.done) return;
  st.done = true;
  streams.delete(st.id);
  refresh(st);
}

function handle(msg) {
  const st = streams.get(msg.g);
  if (!st) {
    if (msg.t === "updated") {
      const el = document.querySelector(`article.assistant[data-generation="${Number(msg.g)}"]`);
      if (el) refresh({ el });
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
      refresh(st);
      break;
  }
}

function send(msg) {
  if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(msg));
}

function connect() {
  const main = document.querySelector("main.chat[data-socket-path]");
  const path = main ? main.dataset.socketPath : null;
  if (path === socketPath && socket) return;
  if (socket) {
    const old = socket;
    socket = null;
    old.onclose = null;
    old.close();
  }
  clearTimeout(reconnectTimer);
  socketPath = path;
  if (!path) return;
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(`${scheme}//${location.host}${path}`);
  socket = ws;
  ws.onopen = () => {
    retryDelay = 250;
    document.body.dataset.socket = "open";
    // The server sends snapshots of running answers; ask again for any it did not cover
    // (e.g. an answer that finished between the page render and this connection).
    const opened = Date.now();
    setTimeout(() => {
      for (const st of streams.values()) if (!(st.snapAt >= opened) && !st.done) askSnapshot(st);
    }, 1000);
  };
  ws.onmessage = (event) => {
    let msg;
    try {
      msg = JSON.parse(event.data);
    } catch {
      return;
    }
    handle(msg);
  };
  ws.onclose = () => {
    if (socket !== ws) return;
    socket = null;
    document.body.dataset.socket = "closed";
    reconnectTimer = setTimeout(() => {
      socketPath = null;
      connect();
    }, retryDelay);
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
