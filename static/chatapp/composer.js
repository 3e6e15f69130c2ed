// The composer (its keys, Stop instead of Send while an answer is written, the message it follows)
// and the branch swaps of Regenerate, Edit and the version arrows.
//
// Stop (the button, or Esc) is the answers' business: the composer says so with a `chat:stop`
// event on the document, which chat.js acts on.

import { focusLost } from "./focus_keeper.js";
import { scrollToBottom, showJump } from "./follow_end.js";
import { answerRunning } from "./queued_message.js";

function stopAnswers() {
  document.dispatchEvent(new CustomEvent("chat:stop"));
}

// The composer offers Stop instead of Send while the branch shown has an answer being written
// (`running`: the server refuses a second one in the conversation), and says after which message
// a follow-up comes: the last one shown, whichever branch that is.
// An answer in the conversation ended (this tab's or another's): a send or an edit refused
// because it was being written may go now, so the refusal goes.
export function answerEnded() {
  for (const refusal of document.querySelectorAll("[data-until-done]")) {
    const line = refusal.parentElement;
    refusal.remove();
    if (!line.textContent.trim()) line.textContent = ""; // :empty again, taking no room
  }
}

export function syncComposer(running) {
  const form = document.getElementById("composer");
  if (!form) return;
  const sendButton = form.querySelector('button[type="submit"]');
  const stop = form.querySelector("button.stop-answer");
  // Stop's state says whether this changed: Send may show beside it (queued_message.js).
  if (sendButton && stop && stop.hidden === running) {
    const focused = document.activeElement === sendButton || document.activeElement === stop;
    sendButton.hidden = running;
    stop.hidden = !running;
    if (focused) (running ? stop : sendButton).focus();
  }
  answerRunning(running);
  showJump(running);
  const last = [...document.querySelectorAll("#messages > article.message:not(.pending)")].pop();
  const after = form.querySelector('input[name="after"]');
  if (after) after.value = last ? last.dataset.message : "";
}

// The message boxes whose keys are handled. Kept here, not as a mark in the page: htmx saves the
// page's HTML for Back and puts it back without its listeners, so a mark would outlive them.
const withKeys = new WeakSet();

// On a touch screen Enter makes a new line, as in a phone's other apps, and Send sends: its
// keyboard has no Shift+Enter to reach for, and a message sent half-written cannot be taken back.
const touchScreen = matchMedia("(hover: none) and (pointer: coarse)");

function entersSend(event) {
  return event.key === "Enter" && !event.shiftKey && !event.isComposing && !touchScreen.matches;
}

export function setupComposer() {
  const box = document.getElementById("message");
  if (!box || withKeys.has(box)) return;
  withKeys.add(box);
  if (touchScreen.matches) {
    box.placeholder = "Message";
    box.dataset.chatPlaceholder = box.placeholder; // what generated_images.js puts back
    box.enterKeyHint = "enter";
  }
  box.addEventListener("keydown", (event) => {
    if (entersSend(event)) {
      event.preventDefault();
      if (box.value.trim()) box.form.requestSubmit();
    }
  });
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

// An edit the server refuses (an answer is being written, a limit) is refused in the edit's own
// form, where the user is: the server's words are meant for the composer's error line.
document.addEventListener("htmx:beforeSwap", (event) => {
  const form = event.detail.requestConfig?.elt;
  const line = form?.isConnected && form.matches(".edit-form") && form.querySelector(".edit-error");
  if (line && event.detail.target?.id === "composer-error") event.detail.target = line;
});

// A branch swap (`data-branch-swap`: regenerate, edit, switch version) puts the server's branch
// in place of the message it was asked about and everything after it. Focus stays on the version
// arrow that was pressed, so it can be pressed again; after Regenerate, Retry, Continue or an
// edit, whose button went with the old version, it goes to the new answer (the last message).
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
  else if (focusLost()) [...document.querySelectorAll("#messages > article.message")].pop()?.focus();
});

document.addEventListener("click", (event) => {
  const button = event.target.closest && event.target.closest("button");
  if (!button) return;
  if (button.matches("#composer button.stop-answer")) stopAnswers();
  else if (button.matches("article.user > .message-footer button.edit")) {
    startEdit(button.closest("article"));
  } else if (button.matches(".edit-form button.cancel-edit")) cancelEdit(button.closest("article"));
});

document.addEventListener("keydown", (event) => {
  const editing = event.target.closest && event.target.closest(".edit-form");
  // Enter sends from the text box only: on a focused Cancel or Save and send it is the button's.
  const inBox = editing && event.target.matches("textarea");
  if (inBox && entersSend(event)) {
    event.preventDefault();
    if (event.target.value.trim()) editing.requestSubmit();
  } else if (event.key === "Escape" && !event.defaultPrevented) {
    if (editing) cancelEdit(editing.closest("article"));
    else if (!document.querySelector("dialog[open]")) stopAnswers(); // Esc closes a lightbox first
  }
});

// The user's own message is on the page the moment it is sent, not when the server answers (a
// new chat's answer comes after its rows are written: ~220 ms under load). It stands in until the
// server's messages are swapped in: in its place for a follow-up (taken out just before the swap,
// so the message is never shown twice), with the whole conversation for a new chat. The box is
// emptied at once; if the send fails the stand-in goes, the draft is put back and the composer
// says why (a refusal is the server's own words, retargeted to the error line).
let pending = null; // {article, text, form, hidden: the first screen it covers}

function showPending(form) {
  const box = form.querySelector("#message");
  const messages = document.getElementById("messages");
  if (!box || !messages || !box.value.trim()) return;
  const article = document.createElement("article");
  article.className = "message user pending";
  article.setAttribute("aria-label", "You (sending)");
  const text = document.createElement("div");
  text.className = "content plain";
  text.textContent = box.value;
  article.append(text);
  const hidden = messages.querySelector(":scope > .first-screen");
  if (hidden) hidden.hidden = true;
  messages.append(article);
  pending = { article, text: box.value, form, hidden };
  box.value = "";
  scrollToBottom();
}

function dropPending() {
  const was = pending;
  pending = null;
  if (was) was.article.remove();
  return was;
}

function notSent(was, why) {
  if (was.hidden) was.hidden.hidden = false;
  const box = was.form.querySelector("#message");
  if (box && box.isConnected && !box.value) {
    box.value = was.text; // the draft is kept, unless something new was typed meanwhile
    box.focus();
  }
  const error = document.getElementById("composer-error");
  if (error && why) {
    error.textContent = `Not sent: ${why}. Your message is back in the box; press Enter to try again.`;
  }
}

function refusedInWords(xhr) {
  return xhr.getResponseHeader("HX-Retarget") === "#composer-error";
}

document.addEventListener("htmx:beforeSwap", (event) => {
  if (!pending || event.detail.requestConfig?.elt !== pending.form) return;
  if (event.detail.shouldSwap && !refusedInWords(event.detail.xhr)) dropPending();
});

document.addEventListener("htmx:afterRequest", (event) => {
  if (!pending || event.target !== pending.form) return;
  const xhr = event.detail.xhr;
  if (event.detail.successful && !refusedInWords(xhr)) {
    dropPending(); // already replaced by the swap; nothing left to do
    return;
  }
  const was = dropPending();
  if (event.detail.successful) notSent(was, null); // the server said why on the error line
  else if (xhr.status) notSent(was, `the server answered ${xhr.status} ${xhr.statusText}`.trim());
  else notSent(was, "the server could not be reached");
});

// A follow-up refused because the conversation went on after the last message shown (in another
// tab): the server sends the branch up to date in place of the messages (views.chat), and its new
// end is what to read before sending again.
document.addEventListener("htmx:oobAfterSwap", (event) => {
  if (event.detail.target?.id === "messages") scrollToBottom();
});

document.addEventListener("htmx:beforeRequest", (event) => {
  const target = event.target;
  if (target.id === "composer" || (target.closest && target.closest("[data-branch-swap]"))) {
    const error = document.getElementById("composer-error");
    if (error) error.textContent = "";
    const editError = target.matches(".edit-form") && target.querySelector(".edit-error");
    if (editError) editError.textContent = "";
  }
  if (target.id === "composer" && !pending) showPending(target); // its values are read already
});
