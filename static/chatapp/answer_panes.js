// The panes of a streaming answer beside its text: the reasoning and its thinking time, the tool
// calls and their runs, citations, attachment notes and image previews, as deltas and snapshots
// carry them; and its footer, which says when the stream goes quiet. Each is drawn as the final
// render (templates/chatapp/_message.html) will show it, so that the final patch changes little.

import { showImagePreviews } from "./generated_images.js";

export function part(view, selector) {
  return view.el.querySelector(selector);
}

export function appendText(node, text) {
  if (text) node.append(document.createTextNode(text));
}

// A part of a tool call's markup, as the server renders it (templates/chatapp/_tool_call.html,
// in the page's <template class="tool-call-template">): the final render brings the same.
function toolCallPart(selector) {
  const blank = document.querySelector("template.tool-call-template").content;
  return blank.querySelector(selector).cloneNode(true);
}

function toolCallEl(view, index) {
  const pane = part(view, ".tool-calls-pane");
  pane.hidden = false;
  let call = pane.querySelector(`.tool-call[data-index="${Number(index)}"]`);
  if (!call) {
    call = toolCallPart(".tool-call");
    // A run adds its flag and its result when it has them (`applyToolRun`).
    call.querySelector(":scope > .tool-flag").remove();
    call.querySelector(":scope > .tool-result").remove();
    call.dataset.index = String(Number(index));
    pane.querySelector(".tool-calls").append(call);
  }
  return call;
}

// A call's run (chatapp/streaming/tool_loop.py CallRun) began or ended: its status in the server's
// words, its arguments pretty-printed (flagged when they are not a JSON object) and its result,
// as the final render (templates/chatapp/_tool_call.html) shows them.
function applyToolRun(view, run) {
  const el = toolCallEl(view, run.index);
  el.dataset.status = run.status;
  el.querySelector(".tool-status").textContent = run.status_text;
  const args = el.querySelector(".tool-args");
  args.textContent = run.pretty;
  args.classList.toggle("invalid", !run.valid);
  if (run.flag && !el.querySelector(":scope > .tool-flag")) {
    const flag = toolCallPart(".tool-flag");
    flag.textContent = run.flag;
    args.after(flag);
  }
  if (run.result && !el.querySelector(":scope > .tool-result")) {
    const details = toolCallPart(".tool-result");
    details.querySelector("pre").textContent = run.result;
    el.append(details);
  }
}

function addCitation(view, annotation) {
  const list = part(view, ".citations");
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

function addAttachmentNotes(view, kinds) {
  const box = part(view, ".attachments");
  for (const kind of kinds) {
    const note = document.createElement("span");
    note.className = "attachment-note";
    note.textContent = `${kind} received (shown when the answer is complete)`;
    box.append(note);
  }
}

export function showThinking(view) {
  const summary = part(view, ".reasoning-pane > summary");
  if (!summary || view.thinkStart === null) return;
  const seconds = (ms) => Math.max(1, Math.round(ms / 1000));
  const text =
    view.thinkEnd === null
      ? `Thinking… ${Math.floor((Date.now() - view.thinkStart) / 1000)} s`
      : `Thought for ${seconds(view.thinkEnd - view.thinkStart)} s`;
  if (summary.textContent !== text) summary.textContent = text;
}

// A stream that goes quiet says so, with the time, instead of an unchanging "writing…"; one this
// page lost its socket for says that it is reconnecting (the gateway may well be writing on).
function showStall(view, stallAfter) {
  const meta = part(view, ".message-footer .meta");
  if (!meta) return;
  if (view.writing === undefined) view.writing = meta.textContent;
  const quiet = Date.now() - view.lastActivity;
  let text = view.writing;
  if (document.body.dataset.socket === "closed") {
    text = view.writing.replace(/writing…$/, "reconnecting…");
  } else if (stallAfter > 0 && quiet >= stallAfter) {
    text = view.writing.replace(/writing…$/, `waiting for the gateway… ${Math.floor(quiet / 1000)} s`);
  }
  if (meta.textContent !== text) meta.textContent = text;
  view.el.classList.toggle("stalled", text !== view.writing);
}

export function tick(view, stallAfter) {
  showThinking(view);
  showStall(view, stallAfter);
}

// The rest of a delta (or a snapshot's, with its reasoning and content left out).
export function appendParts(view, msg) {
  if (msg.reasoning) {
    if (view.thinkStart === null) {
      view.thinkStart = Date.now();
      showThinking(view);
    }
    // The pane is open while streaming (unless the user closed it); keep its end in view.
    part(view, ".reasoning-pane").hidden = false;
    const box = part(view, ".reasoning");
    const atEnd = box.scrollHeight - box.scrollTop - box.clientHeight < 24;
    appendText(box, msg.reasoning);
    if (atEnd) box.scrollTop = box.scrollHeight;
  }
  for (const call of msg.tool_calls || []) {
    const el = toolCallEl(view, call.index);
    if (call.name) el.querySelector(".tool-name").textContent = call.name;
    if (!el.dataset.status) appendText(el.querySelector(".tool-args"), call.arguments);
  }
  for (const run of msg.tool_runs || []) applyToolRun(view, run);
  for (const annotation of msg.annotations || []) addCitation(view, annotation);
  if (msg.attachments && msg.attachments.length) addAttachmentNotes(view, msg.attachments);
  if (msg.previews) showImagePreviews(view.el, msg.previews);
}
