// A message sent while an answer is being written waits its turn, as in Open WebUI and LibreChat:
// the server takes one answer at a time in a conversation, so instead of refusing it the composer
// keeps it, shown above the box as queued with a Cancel, and sends it the moment the answer ends
// (one per answer: the next waits for the answer to this one). While an answer runs, Send shows as
// "Queue" beside Stop once something is typed (Enter queues too).
//
// It is sent as the composer sends anything (its form, so what is attached and picked goes with
// it); a draft typed meanwhile stays in the box. Cancel puts the text back in an empty box.

let running = false;
const queue = []; // {text, form, item}

function composer() {
  return document.getElementById("composer");
}

// Send's face: "Queue" while an answer runs and something is typed, else as composer.js left it.
function offer() {
  const form = composer();
  const send = form?.querySelector('button[type="submit"]');
  const box = form?.querySelector("#message");
  if (!send || !box) return;
  if (running) {
    send.hidden = !box.value.trim();
    send.textContent = "Queue";
    send.title = "Send this message as soon as the answer ends";
  } else if (send.textContent !== "Send") {
    send.textContent = "Send";
    send.removeAttribute("title");
  }
}

function list(form) {
  let shown = form.querySelector(".queued-messages");
  if (!shown) {
    shown = document.createElement("ul");
    shown.className = "queued-messages";
    shown.setAttribute("aria-label", "Queued messages");
    form.querySelector("#message").before(shown);
  }
  return shown;
}

function enqueue(form, text) {
  const item = document.createElement("li");
  item.className = "queued-message";
  const label = document.createElement("span");
  label.className = "queued-label";
  label.textContent = "Queued: sends when the answer ends";
  const words = document.createElement("span");
  words.className = "queued-text";
  words.textContent = text;
  const cancel = document.createElement("button");
  cancel.type = "button";
  cancel.className = "queued-cancel";
  cancel.textContent = "Cancel";
  cancel.setAttribute("aria-label", `Cancel the queued message: ${text.slice(0, 60)}`);
  item.append(label, words, cancel);
  list(form).append(item);
  queue.push({ text, form, item });
}

function forget(entry) {
  queue.splice(queue.indexOf(entry), 1);
  const shown = entry.item.parentElement;
  entry.item.remove();
  if (shown && !shown.children.length) shown.remove();
}

function sendNext() {
  while (queue.length && !queue[0].form.isConnected) forget(queue[0]); // another page now
  const entry = queue[0];
  if (!entry || running) return;
  forget(entry);
  const box = entry.form.querySelector("#message");
  const draft = box.value;
  box.value = entry.text;
  entry.form.requestSubmit(); // htmx reads the form now (and composer.js empties the box)
  box.value = draft;
}

// Called by composer.js's `syncComposer` whenever it learns whether an answer runs: an answer that
// ended lets the first queued message go.
export function answerRunning(now) {
  const ended = running && !now;
  running = now;
  offer();
  if (ended) sendNext();
}

// A send while an answer runs is queued, before htmx (which listens on the form) sees it.
document.addEventListener(
  "submit",
  (event) => {
    const form = event.target;
    if (!running || form.id !== "composer") return;
    event.preventDefault();
    event.stopPropagation();
    const box = form.querySelector("#message");
    const text = box?.value.trim();
    if (!text) return;
    enqueue(form, box.value);
    box.value = "";
    offer();
    box.focus();
  },
  { capture: true },
);

document.addEventListener("input", (event) => {
  if (event.target.id === "message") offer();
});

document.addEventListener("click", (event) => {
  const button = event.target.closest && event.target.closest(".queued-cancel");
  if (!button) return;
  const entry = queue.find((queued) => queued.item.contains(button));
  if (!entry) return;
  forget(entry);
  const box = entry.form.querySelector("#message");
  if (box && !box.value.trim()) box.value = entry.text; // nothing typed is lost
  box?.focus();
});
