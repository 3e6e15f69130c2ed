// The chat page's streaming answers: which answers stream, the socket's messages routed to them,
// and the rounds of a turn whose tool calls ran. Each job is a module:
// - socket.js: the tab's one websocket, its watch and reconnect;
// - stream_state.js: one answer's state and what each message does to it (pure, with vectors
//   in tests/vectors/stream/ that its Python twin chatapp/ws/page_model.py passes too);
// - live_render.js: that state drawn into the answer's element as it streams, its text and
//   settled blocks; answer_panes.js, what deltas carry beside the text (reasoning, tool calls,
//   citations, attachments) and the quiet-stream note; follow_end.js, the page kept at the end;
// - final_patch.js: the server's final render patched in;
// - composer.js: the composer and the branch swaps;
// - answer_status.js: the status line that says an answer started and ended.

import { connect, send } from "./socket.js";
import { afterWatch, messagesFromWire, receive, refuseSettle, start, watchSent } from "./stream_state.js";
import {
  appendContent,
  clearDraft,
  createView,
  drawTail,
  replaceWith,
  settleInto,
  showDraft,
} from "./live_render.js";
import { appendParts, tick } from "./answer_panes.js";
import { followingBottom, scrollToBottom } from "./follow_end.js";
import { refresh } from "./final_patch.js";
import { answerEnded, setupComposer, syncComposer } from "./composer.js";
import "./voice_input.js";
import { answerContinues, answerRendered, answerStarted } from "./answer_status.js";

const streams = new Map(); // generation id -> {id, el, state, view} of its element
const early = new Map(); // generation id -> messages that arrived before its element
const finished = new Set(); // generation ids whose `done` this page has had
// Rounds whose tool calls ran, and whose next round's answer is not on the page yet: the turn is
// still running (the composer offers Stop, which stops the turn through any of its rounds).
const bridging = new Set();

function streamFor(el, atLoad = false) {
  const id = Number(el.dataset.generation);
  let st = streams.get(id);
  if (st && st.el === el) return st;
  const box = el.querySelector(":scope > .content");
  const tail = box.querySelector(":scope > .live-tail")?.textContent || "";
  const state = start({
    g: id,
    seq: Number(el.dataset.seq || 0),
    settledEnd: Number(box.dataset.settled || 0),
    tail,
    reasoning: el.querySelector(".reasoning")?.textContent || "",
  });
  st = { id, el, state, view: createView(el, tail) };
  streams.set(id, st);
  answerStarted(id, atLoad);
  drawTail(st.view);
  for (const msg of early.get(id) || []) handle(msg);
  early.delete(id);
  return st;
}

function registerAll(root) {
  const scope = root || document;
  const found = scope.querySelectorAll('article.assistant[data-status="streaming"]');
  for (const el of found) streamFor(el, scope === document);
  if (scope.matches && scope.matches('article.assistant[data-status="streaming"]')) streamFor(scope);
}

function tickStreams() {
  const holder = document.querySelector("[data-stall-notice]");
  const stallAfter = holder ? Number(holder.dataset.stallNotice) : 0;
  for (const st of streams.values()) {
    if (st.state.done || !st.el.isConnected) continue;
    tick(st.view, stallAfter);
  }
}
setInterval(tickStreams, 250);

// A message through the state machine, then its effects carried out on the page.
function step(st, result) {
  st.state = result.state;
  let refused = false; // a settle the page could not place: the text stays text (and the rest)
  for (const effect of result.effects) {
    switch (effect.do) {
      case "append": {
        const follow = followingBottom();
        if (effect.settle || effect.draft !== undefined) clearDraft(st.view);
        appendContent(st.view, effect.delta);
        if (effect.settle && !refused && !settleInto(st.view, effect.settle)) {
          refused = true;
          step(st, refuseSettle(st.state, effect.settle, Date.now()));
        }
        if (effect.draft && !refused) showDraft(st.view, effect.draft);
        appendParts(st.view, effect.delta);
        if (follow) scrollToBottom();
        break;
      }
      case "replace":
        replaceWith(st.view, effect.snapshot, effect.tail, effect.draft);
        break;
      case "send":
        send(effect.message);
        break;
      case "finish":
        onDone(st, effect.done);
        break;
      case "refresh":
        refresh(st.el, afterPatch);
        break;
    }
  }
}

function onDone(st, msg) {
  streams.delete(st.id);
  if (msg.next) answerContinues(st.id);
  refresh(st.el, afterPatch);
  if (msg.next) addNextRound(st.el, st.id, msg.next);
  syncComposer(running()); // Send is back at once, before the final render (unless a round follows)
}

// A render patched in: an answer still running restarts from its render's seq.
function afterPatch(el) {
  const st = streams.get(Number(el.dataset.generation));
  if (st && st.el === el) streams.delete(st.id);
  answerRendered(el);
  registerAll(el);
  syncComposer(running());
}

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
  syncComposer(running());
}

// The user's spend, pushed when one of their costs settles (chatapp/costs/spend_push.py): each
// top-level element replaces the page's element with its id (the sidebar's figures, the
// composer's limit warning).
function swapSpend(html) {
  const template = document.createElement("template");
  template.innerHTML = html;
  for (const fresh of [...template.content.children]) {
    if (fresh.id) document.getElementById(fresh.id)?.replaceWith(fresh);
  }
}

// A conversation's title, written by a model after its first answer (chatapp/streaming/titles.py):
// the sidebar's entry and, for the conversation on screen, its header and the tab's title. Text
// only, never markup.
function retitle(conversationPk, title) {
  const pk = Number(conversationPk);
  if (typeof title !== "string" || !title || !Number.isInteger(pk)) return;
  const link = document.getElementById(`conversation-link-${pk}`);
  if (link) link.textContent = title;
  const rename = document.getElementById(`rename-${pk}`);
  if (rename) rename.value = title;
  document
    .querySelector(`#conversation-item-${pk} .item-menu summary`)
    ?.setAttribute("aria-label", `Options for “${title}”`);
  if (document.querySelector("main.chat")?.dataset.conversation !== String(pk)) return;
  const heading = document.getElementById("conversation-title");
  if (heading) heading.textContent = title;
  const field = document.getElementById("title");
  if (field) field.value = title;
  document.title = `${title} · Gateway Chat`;
}

function handle(msg) {
  if (msg.t === "watching" || msg.t === "gone") return; // about the conversation, not an answer
  if (msg.t === "spend") {
    if (typeof msg.html === "string") swapSpend(msg.html);
    return;
  }
  if (msg.t === "sidebar") {
    // Another tab pinned, filed, archived or deleted conversations (organise.js fetches them).
    document.dispatchEvent(new CustomEvent("chat:sidebar-changed"));
    return;
  }
  if (msg.t === "title") {
    retitle(msg.c, msg.title);
    return;
  }
  if (msg.t === "error") {
    // A message of this page's the server refused (chatapp/ws/message_limits.py): nothing to show.
    console.warn("The server refused a websocket message:", msg.error);
    return;
  }
  if (msg.t === "done") {
    finished.add(msg.g);
    if (!msg.next) answerEnded(); // a turn whose tools ran goes on in its next round
  }
  const st = streams.get(msg.g);
  if (!st) {
    const shown = document.querySelector(`article.assistant[data-generation="${Number(msg.g)}"]`);
    if (msg.t === "done" && msg.next && shown) {
      answerContinues(msg.g);
      addNextRound(shown, msg.g, msg.next); // it was put in place finished, before this came
      return;
    }
    if (msg.t === "updated") {
      if (shown) refresh(shown, afterPatch);
      return;
    }
    const list = early.get(msg.g) || [];
    if (list.length < 2000) list.push(msg);
    early.set(msg.g, list);
    return;
  }
  step(st, receive(st.state, msg, Date.now()));
}

// The server answers a watch with snapshots of running answers: the watch stands for their
// snapshot asks, and a while after it the page asks again for any it did not cover (e.g. an
// answer that finished between the page render and the watch).
function onWatchSent(asked) {
  for (const st of streams.values()) step(st, watchSent(st.state, asked));
}

function onWatched(asked) {
  for (const st of streams.values()) step(st, afterWatch(st.state, asked, Date.now()));
}

function connectSocket() {
  const onMessage = (parsed) => {
    for (const msg of messagesFromWire(parsed)) handle(msg);
  };
  connect({ onMessage, onWatchSent, onWatched });
}

// --- Stop: the answers running in the branch shown, and the turn of a bridging round ---------

// A comparison's answers run side by side (in `.comparison`'s columns).
const RUNNING = '[data-status="streaming"]';
const SHOWN_RUNNING = `#messages > article.assistant${RUNNING}, #messages > .comparison article.assistant${RUNNING}`;

function runningAnswers() {
  const shown = document.querySelectorAll(SHOWN_RUNNING);
  return [...shown].filter((el) => !finished.has(Number(el.dataset.generation)));
}

function running() {
  return runningAnswers().length > 0 || bridging.size > 0;
}

document.addEventListener("chat:stop", () => {
  for (const el of runningAnswers()) el.querySelector(".message-footer button.stop")?.click();
  for (const id of bridging) send({ t: "stop", g: id }); // the turn, whichever round it is in
});

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

function init(root) {
  // A page, a new conversation swapped in after its first message, or a conversation reached
  // through the sidebar's boosted links or back and forward (htmx swaps in the body's content,
  // which holds the chat): its end is in view.
  if (root === document || root.matches?.("main.chat") || root.querySelector?.("main.chat")) {
    scrollToBottom();
  }
  streams.forEach((st, id) => {
    if (!st.el.isConnected) streams.delete(id);
  });
  registerAll(root);
  setupComposer();
  syncComposer(running());
  connectSocket();
}

document.addEventListener("DOMContentLoaded", () => init(document));
document.addEventListener("htmx:load", (event) => init(event.target));
