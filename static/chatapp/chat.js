// The page's websocket protocol (see chatapp/ws_protocol.py), the composer (its keys, Stop while
// an answer is written), and the branch swaps of Regenerate, Edit and the version arrows.
//
// Each streaming answer keeps the `seq` of the last delta applied. Deltas at or below it are
// duplicates and dropped; one beyond the next means a gap: it is held back and a snapshot
// requested, which replaces the text so far. Model text enters the page as text nodes, or as the
// server's sanitized HTML of its settled blocks (chatapp/live_blocks.py): those replace the start
// of the unsettled tail, which is shown as text. The server's final render then equals the page.

const streams = new Map(); // generation id -> state of its element
const early = new Map(); // generation id -> messages that arrived before its element
const finished = new Set(); // generation ids whose `done` this page has had
let socket = null;
let watched = null; // the conversation this socket was last told to watch
let retryDelay = 250;
let reconnectTimer = null;
const SESSION_ENDED = 4401; // the server's close code for a socket without a valid session

function streamFor(el) {
  const id = Number(el.dataset.generation);
  let st = streams.get(id);
  if (st && st.el === el) return st;
  st = { id, el, seq: Number(el.dataset.seq || 0), held: new Map(), askedAt: 0, done: false };
  const box = el.querySelector(":scope > .content");
  st.settledEnd = Number(box.dataset.settled || 0);
  st.tail = box.querySelector(":scope > .live-tail")?.textContent || "";
  st.tailEl = null;
  st.lastActivity = Date.now();
  st.thinkStart = null;
  st.thinkEnd = null;
  streams.set(id, st);
  drawTail(st);
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
    // The structure of templates/chatapp/_tool_call.html, which the final render brings.
    call = document.createElement("div");
    call.className = "tool-call";
    call.dataset.index = String(Number(index));
    call.dataset.status = "";
    const head = document.createElement("div");
    head.className = "tool-head";
    const name = document.createElement("code");
    name.className = "tool-name";
    name.textContent = "tool";
    const status = document.createElement("span");
    status.className = "tool-status";
    head.append(name, status);
    const args = document.createElement("pre");
    args.className = "tool-args";
    call.append(head, args);
    pane.querySelector(".tool-calls").append(call);
  }
  return call;
}

// A call's run (chatapp/tool_loop.py CallRun) began or ended: its status in the server's words,
// its arguments pretty-printed (flagged when they are not a JSON object) and its result, as the
// final render (templates/chatapp/_tool_call.html) shows them.
function applyToolRun(st, run) {
  const el = toolCallEl(st, run.index);
  el.dataset.status = run.status;
  el.querySelector(".tool-status").textContent = run.status_text;
  const args = el.querySelector(".tool-args");
  args.textContent = run.pretty;
  args.classList.toggle("invalid", !run.valid);
  let flag = el.querySelector(":scope > .tool-flag");
  if (run.flag && !flag) {
    flag = document.createElement("p");
    flag.className = "tool-flag";
    flag.textContent = run.flag;
    args.after(flag);
  }
  if (run.result && !el.querySelector(":scope > .tool-result")) {
    const details = document.createElement("details");
    details.className = "tool-result";
    const summary = document.createElement("summary");
    summary.textContent = "Result";
    const pre = document.createElement("pre");
    pre.textContent = run.result;
    details.append(summary, pre);
    el.append(details);
  }
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

// The unsettled tail, shown as text: as code when it opens a fence, so code streams looking like
// code (it is highlighted once its fence closes and the block settles).
const FENCE_OPEN = /^ {0,3}(`{3,}|~{3,})[ \t]*([^\s`]*)[^\n]*\n/;

function drawTail(st) {
  const box = part(st, ".content");
  let el = box.querySelector(":scope > .live-tail");
  if (!st.tail) {
    if (el) el.remove();
    st.tailEl = null;
    return;
  }
  if (!el) {
    el = document.createElement("div");
    box.append(el);
  }
  const shown = st.tail.replace(/^([ \t]*\r?\n)+/, ""); // blank lines before a block show as space
  const fence = FENCE_OPEN.exec(shown);
  st.tailOpened = shown.includes("\n"); // its first line, which says what it is, is complete
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
    code.textContent = shown.slice(fence[0].length);
    pre.append(code);
    el.replaceChildren(head, pre);
    st.tailEl = code;
  } else {
    el.className = "live-tail";
    el.textContent = shown;
    st.tailEl = el;
  }
}

function appendTail(st, text) {
  st.tail += text;
  if (!st.tailEl || (!st.tailOpened && text.includes("\n"))) drawTail(st);
  else appendText(st.tailEl, text);
}

// `[start, end, html]`: the sanitized HTML of the content from UTF-16 offset `start` to `end`.
// `[start, end, html, join, split]`: the first `split` units of `html` continue the block still
// open (a list's next items, a table's rows...): they go into its element, or replace it when
// `join` is "=", and the rest follows it (chatapp/live_blocks.py).
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

function applySettled(st, settled) {
  const [start, end, html, join, split] = settled;
  if (start !== st.settledEnd || end - start > st.tail.length) {
    askSnapshot(st); // this page's blocks were split elsewhere (it rendered before the stream)
    return;
  }
  const box = part(st, ".content");
  const tail = box.querySelector(":scope > .live-tail");
  let rest = html;
  if (join) {
    const target = joinTarget(box, tail, join);
    if (!target) {
      askSnapshot(st); // the open block is not what this page shows
      return;
    }
    const joined = fragment(html.slice(0, split));
    rest = html.slice(split);
    if (join === "=") target.replaceWith(joined);
    else {
      target.append(joined);
      if (join === "table") target.append("\n"); // as `</tbody>\n</table>` has it
      if (join === "p") target.normalize(); // one text node across the lines, as rendered
    }
  }
  box.insertBefore(fragment(rest), tail);
  st.tail = st.tail.slice(end - start);
  st.settledEnd = end;
  drawTail(st);
}

function showThinking(st) {
  const summary = part(st, ".reasoning-pane > summary");
  if (!summary || st.thinkStart === null) return;
  const seconds = (ms) => Math.max(1, Math.round(ms / 1000));
  const text =
    st.thinkEnd === null
      ? `Thinking… ${Math.floor((Date.now() - st.thinkStart) / 1000)} s`
      : `Thought for ${seconds(st.thinkEnd - st.thinkStart)} s`;
  if (summary.textContent !== text) summary.textContent = text;
}

// A stream that goes quiet says so, with the time, instead of an unchanging "writing…".
function showStall(st, stallAfter) {
  const meta = part(st, ".message-footer .meta");
  if (!meta) return;
  if (st.writing === undefined) st.writing = meta.textContent;
  const quiet = Date.now() - st.lastActivity;
  const text =
    stallAfter > 0 && quiet >= stallAfter
      ? st.writing.replace(/writing…$/, `waiting for the gateway… ${Math.floor(quiet / 1000)} s`)
      : st.writing;
  if (meta.textContent !== text) meta.textContent = text;
  st.el.classList.toggle("stalled", text !== st.writing);
}

function tickStreams() {
  const holder = document.querySelector("[data-stall-notice]");
  const stallAfter = holder ? Number(holder.dataset.stallNotice) : 0;
  for (const st of streams.values()) {
    if (st.done || !st.el.isConnected) continue;
    showThinking(st);
    showStall(st, stallAfter);
  }
}
setInterval(tickStreams, 250);

function applyFields(st, msg) {
  const follow = followingBottom();
  applyParts(st, msg);
  if (follow) scrollToBottom();
}

function applyParts(st, msg) {
  st.lastActivity = Date.now();
  if (msg.content) {
    appendTail(st, msg.content);
    if (st.thinkStart !== null && st.thinkEnd === null) {
      st.thinkEnd = Date.now(); // the answer began: the thinking is over
      showThinking(st);
    }
  }
  if (msg.settled) applySettled(st, msg.settled);
  if (msg.reasoning) {
    if (st.thinkStart === null) {
      st.thinkStart = Date.now();
      showThinking(st);
    }
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
    if (!el.dataset.status) appendText(el.querySelector(".tool-args"), call.arguments);
  }
  for (const run of msg.tool_runs || []) applyToolRun(st, run);
  for (const annotation of msg.annotations || []) addCitation(st, annotation);
  if (msg.attachments && msg.attachments.length) addAttachmentNotes(st, msg.attachments);
  if (msg.previews) window.showImagePreviews(st.el, msg.previews); // generated_images.js
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
  const [, end, html] = msg.settled || [0, 0, ""];
  const box = part(st, ".content");
  const template = document.createElement("template");
  template.innerHTML = html;
  box.replaceChildren(template.content);
  st.settledEnd = end;
  st.tail = (msg.content || "").slice(end);
  drawTail(st);
  part(st, ".reasoning").textContent = msg.reasoning || "";
  part(st, ".reasoning-pane").hidden = !msg.reasoning;
  if (msg.thinking) {
    const [ms, over] = msg.thinking;
    st.thinkStart = Date.now() - ms;
    st.thinkEnd = over ? Date.now() : null;
    showThinking(st);
  }
  part(st, ".tool-calls").textContent = "";
  part(st, ".tool-calls-pane").hidden = true;
  part(st, ".citations").textContent = "";
  part(st, ".citations").hidden = true;
  // An image generation's figures stay: the snapshot's previews go into them by index, so a
  // picture is replaced in place, never removed and drawn again.
  for (const child of [...part(st, ".attachments").childNodes]) {
    if (!(child instanceof Element && child.matches("figure.generated-image[data-index]"))) {
      child.remove();
    }
  }
  applyParts(st, { ...msg, content: "", reasoning: "", settled: null });
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

// The live blocks are the final render's (the same server renderer): only a block that differs
// (markdown that reaches across blocks, such as a footnote) is replaced, so nothing else moves.
function patchChildren(region, next) {
  if (region.innerHTML === next.innerHTML) return;
  const old = [...region.childNodes];
  const fresh = [...next.childNodes];
  fresh.forEach((node, i) => {
    if (i < old.length && old[i].isEqualNode(node)) return;
    if (i < old.length) old[i].replaceWith(node);
    else region.append(node);
  });
  for (const node of old.slice(fresh.length)) node.remove();
}

function patchAnswer(el, fresh) {
  const follow = followingBottom();
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
  const st = streams.get(Number(el.dataset.generation));
  if (st && st.el === el) streams.delete(st.id); // a still-running render restarts from its seq
  registerAll(el);
  syncComposer();
  if (follow) scrollToBottom();
}

function onDone(st, msg) {
  if (st.done) return;
  st.done = true;
  streams.delete(st.id);
  refresh(st.el);
  if (msg.next) addNextRound(st.el, st.id, msg.next);
  syncComposer(); // Send is back at once, before the final render arrives (unless a round follows)
}

// Rounds whose tool calls ran, and whose next round's answer is not on the page yet: the turn is
// still running (the composer offers Stop, which stops the turn through any of its rounds).
const bridging = new Set();

// The turn's tool calls ran and its next round is being written: its answer comes after this
// one (its deltas so far wait in `early` until its element is registered). A round that ended
// before it was put in place passes its own `done` on, so every round of the turn appears.
async function addNextRound(el, id, url, tries = 0) {
  bridging.add(id);
  let next = null;
  try {
    const response = await fetch(url, { headers: { "HX-Request": "true" } });
    if (response.ok) {
      const template = document.createElement("template");
      template.innerHTML = await response.text();
      next = template.content.querySelector("article.assistant");
    }
  } catch {
    next = null;
  }
  if (!next) {
    if (tries < 3) setTimeout(() => addNextRound(el, id, url, tries + 1), 1000 * (tries + 1));
    else location.reload(); // the page cannot follow the turn: show it as the server has it
    return;
  }
  bridging.delete(id);
  if (el.isConnected && !document.getElementById(next.id)) {
    const follow = followingBottom();
    el.after(next);
    if (window.htmx) window.htmx.process(next);
    registerAll(next);
    if (follow) scrollToBottom();
    const nextId = Number(next.dataset.generation);
    if (next.dataset.status !== "streaming") {
      const held = early.get(nextId) || [];
      early.delete(nextId);
      const done = held.find((msg) => msg.t === "done" && msg.next);
      if (done) addNextRound(next, nextId, done.next);
    }
  }
  syncComposer();
}

// The user's spend, pushed when one of their costs settles (chatapp/spend_push.py): each
// top-level element replaces the page's element with its id (the sidebar's figures, the
// composer's limit warning).
function swapSpend(html) {
  const template = document.createElement("template");
  template.innerHTML = html;
  for (const fresh of [...template.content.children]) {
    if (fresh.id) document.getElementById(fresh.id)?.replaceWith(fresh);
  }
}

function handle(msg) {
  if (msg.t === "watching" || msg.t === "gone") return; // about the conversation, not an answer
  if (msg.t === "spend") {
    if (typeof msg.html === "string") swapSpend(msg.html);
    return;
  }
  if (msg.t === "error") {
    // A message of this page's the server refused (chatapp/ws_limits.py): nothing to show.
    console.warn("The server refused a websocket message:", msg.error);
    return;
  }
  if (msg.t === "done") finished.add(msg.g);
  const st = streams.get(msg.g);
  if (!st) {
    const shown = document.querySelector(`article.assistant[data-generation="${Number(msg.g)}"]`);
    if (msg.t === "done" && msg.next && shown) {
      addNextRound(shown, msg.g, msg.next); // it was put in place finished, before this came
      return;
    }
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
      onDone(st, msg);
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
  ws.onclose = (event) => {
    if (socket !== ws) return;
    socket = null;
    watched = null;
    document.body.dataset.socket = "closed";
    if (event.code === SESSION_ENDED && holder.dataset.loginPath) {
      // Signed out (here or in another tab), password changed or deactivated: reconnecting would
      // be refused for ever; sign in again and come back here.
      const back = encodeURIComponent(location.pathname + location.search);
      location.assign(`${holder.dataset.loginPath}?next=${back}`);
      return;
    }
    reconnectTimer = setTimeout(connect, retryDelay);
    retryDelay = Math.min(retryDelay * 2, 5000);
  };
}

// Test hook: drop the socket as a network failure would (the page reconnects by itself).
window.chatDropSocket = () => socket && socket.close();

// The composer offers Stop instead of Send while the branch shown has an answer being written
// (the server refuses a second one in the conversation), and says after which message a follow-up
// comes: the last one shown, whichever branch that is.
function runningAnswers() {
  const shown = document.querySelectorAll('#messages > article.assistant[data-status="streaming"]');
  return [...shown].filter((el) => !finished.has(Number(el.dataset.generation)));
}

function syncComposer() {
  const form = document.getElementById("composer");
  if (!form) return;
  const running = runningAnswers().length > 0 || bridging.size > 0;
  const sendButton = form.querySelector('button[type="submit"]');
  const stop = form.querySelector("button.stop-answer");
  if (sendButton && stop && sendButton.hidden !== running) {
    const focused = document.activeElement === sendButton || document.activeElement === stop;
    sendButton.hidden = running;
    stop.hidden = !running;
    if (focused) (running ? stop : sendButton).focus();
  }
  const last = [...document.querySelectorAll("#messages > article.message")].pop();
  const after = form.querySelector('input[name="after"]');
  if (after) after.value = last ? last.dataset.message : "";
}

function stopRunning() {
  for (const el of runningAnswers()) el.querySelector(".message-footer button.stop")?.click();
  for (const id of bridging) send({ t: "stop", g: id }); // the turn, whichever round it is in
}

// Edit and resend: the message's form (its <template>) takes the text's place until it is sent or
// cancelled; the answer to it then replaces the message and what followed (a branch swap).
function startEdit(article) {
  let form = article.querySelector(":scope > .edit-form");
  if (!form) {
    const template = article.querySelector(":scope > template.edit-template");
    if (!template) return;
    form = template.content.firstElementChild.cloneNode(true);
    const box = form.querySelector("textarea");
    box.value = article.querySelector(":scope > .content").textContent;
    box.rows = Math.min(12, Math.max(3, box.value.split("\n").length + 1));
    template.before(form);
    article.classList.add("editing");
    if (window.htmx) window.htmx.process(form);
  }
  const box = form.querySelector("textarea");
  box.focus();
  box.setSelectionRange(box.value.length, box.value.length);
}

function cancelEdit(article) {
  article.querySelector(":scope > .edit-form")?.remove();
  article.classList.remove("editing");
  article.querySelector(":scope > .message-footer button.edit")?.focus();
}

// A branch swap (`data-branch-swap`: regenerate, edit, switch version) puts the server's branch
// in place of the message it was asked about and everything after it. Focus stays on the version
// arrow that was pressed, so it can be pressed again.
let branchSwap = null;

document.addEventListener("htmx:beforeSwap", (event) => {
  const target = event.detail.target; // htmx fires this on the target, not on what asked
  const origin = event.detail.requestConfig?.elt?.closest("[data-branch-swap]");
  if (!origin || !event.detail.shouldSwap || !target.matches("#messages > article.message")) return;
  while (target.nextElementSibling) target.nextElementSibling.remove();
  const arrow = ["version-previous", "version-next"].find((name) => origin.classList.contains(name));
  branchSwap = { before: target.previousElementSibling, arrow };
});

document.addEventListener("htmx:afterSettle", () => {
  if (!branchSwap) return;
  const { before, arrow } = branchSwap;
  branchSwap = null;
  const first = before ? before.nextElementSibling : document.querySelector("#messages > article");
  if (!first) return;
  first.scrollIntoView({ block: "nearest" });
  const button = arrow && first.querySelector(`.versions button.${arrow}`);
  const other = first.querySelector(".versions button:not([disabled])");
  if (button && !button.disabled) button.focus();
  else if (arrow && other) other.focus();
});

document.addEventListener("click", (event) => {
  const button = event.target.closest && event.target.closest("button");
  if (!button) return;
  if (button.matches("#composer button.stop-answer")) stopRunning();
  else if (button.matches("article.user > .message-footer button.edit")) {
    startEdit(button.closest("article"));
  } else if (button.matches(".edit-form button.cancel-edit")) cancelEdit(button.closest("article"));
});

document.addEventListener("keydown", (event) => {
  const editing = event.target.closest && event.target.closest(".edit-form");
  if (editing && event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    if (event.target.value.trim()) editing.requestSubmit();
  } else if (event.key === "Escape" && !event.defaultPrevented) {
    if (editing) cancelEdit(editing.closest("article"));
    else if (!document.querySelector("dialog[open]")) stopRunning(); // Esc closes a lightbox first
  }
});

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
  // A page, or a new conversation swapped in after its first message: its end is in view.
  if (root === document || (root.matches && root.matches("main.chat"))) scrollToBottom();
  streams.forEach((st, id) => {
    if (!st.el.isConnected) streams.delete(id);
  });
  registerAll(root);
  setupComposer();
  syncComposer();
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
  const target = event.target;
  if (target.id === "composer" || (target.closest && target.closest("[data-branch-swap]"))) {
    const error = document.getElementById("composer-error");
    if (error) error.textContent = "";
  }
});
