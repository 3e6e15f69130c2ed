// Read aloud: an answer's "Read aloud" button plays its speech as the bytes arrive.
//
// One <audio> element for the page (one reading at a time), pointed at the answer's speech URL:
// the browser streams it and starts playing before the whole file is in. Stop pauses it and
// drops its src, which aborts the request: the server sees the disconnect and closes the
// gateway's request (chatapp/read_aloud/stream.py). The audio's own events carry no words, so when
// a reading ends or fails the page asks the server what became of it (the gateway's record
// decides whether the audio was whole) and says so next to the button.
//
// Listeners are delegated on the document: answers chat.js patches in later need no setup.

const STATE_TRIES = 8; // the record is confirmed a moment after the body ends
const STATE_FIRST_WAIT_MS = 250;

let player = null;
let current = null; // {url, stateUrl} of the reading the player holds

function audioElement() {
  if (player) return player;
  player = document.createElement("audio");
  player.id = "read-aloud-player";
  player.preload = "none";
  player.hidden = true;
  player.addEventListener("playing", () => show("playing"));
  player.addEventListener("waiting", () => show("loading"));
  player.addEventListener("ended", () => finish(""));
  player.addEventListener("error", () => {
    if (current) finish("The audio could not be played.");
  });
  document.body.append(player);
  return player;
}

// The button of the reading, found again by URL: chat.js may have swapped the answer since.
function buttonOf(reading) {
  if (!reading) return null;
  for (const button of document.querySelectorAll("button.read-aloud")) {
    if (button.dataset.speechUrl === reading.url) return button;
  }
  return null;
}

function noteOf(button) {
  let note = button.nextElementSibling;
  if (!note || !note.classList.contains("read-aloud-note")) {
    note = document.createElement("span");
    note.className = "read-aloud-note";
    note.setAttribute("role", "status");
    button.after(note);
  }
  return note;
}

function say(button, text) {
  if (!button) return;
  const note = noteOf(button);
  note.textContent = text;
  note.hidden = !text;
}

function show(state) {
  const button = buttonOf(current);
  if (!button) return;
  button.dataset.reading = state;
  button.textContent = "Stop reading";
  say(button, state === "loading" ? "Loading the audio…" : "");
}

function reset(button) {
  if (!button) return;
  delete button.dataset.reading;
  button.textContent = "Read aloud";
}

function release() {
  const audio = audioElement();
  audio.pause();
  // Without a src (and a load) the element drops its request: the server sees the disconnect.
  audio.removeAttribute("src");
  audio.load();
}

async function outcome(stateUrl) {
  let wait = STATE_FIRST_WAIT_MS;
  for (let attempt = 0; attempt < STATE_TRIES; attempt += 1) {
    const response = await fetch(stateUrl, { credentials: "same-origin", cache: "no-store" });
    if (!response.ok) return null;
    const state = await response.json();
    if (state.status !== "streaming" || state.refused) return state;
    await new Promise((resolve) => setTimeout(resolve, wait));
    wait *= 2;
  }
  return null;
}

// The reading ended (or failed to play): say what the server recorded, if it was not whole.
async function finish(fallback) {
  const reading = current;
  current = null;
  release();
  reset(buttonOf(reading));
  if (!reading) return;
  let text = fallback;
  try {
    const state = await outcome(reading.stateUrl);
    if (fallback && state && state.refused) {
      text = state.refused; // refused before it began: stopped a moment ago, being read already
    } else if (state && state.status !== "completed" && state.status !== "cancelled") {
      text = state.error || `The reading ended ${state.status}.`;
    } else if (state && state.status === "completed") {
      text = "";
    }
  } catch {
    // the words of `fallback` stand
  }
  say(buttonOf(reading), text);
}

function stop() {
  const button = buttonOf(current);
  current = null;
  release();
  reset(button);
  say(button, "Stopped.");
}

function start(button) {
  const url = button.dataset.speechUrl;
  const stateUrl = button.dataset.stateUrl;
  if (!url || !url.startsWith("/") || url.startsWith("//")) return;
  if (current) stop();
  current = { url, stateUrl };
  const audio = audioElement();
  audio.src = url;
  show("loading");
  // Within the click: browsers let a page start audio during a user gesture.
  audio.play().catch((error) => {
    if (current && current.url === url && error.name === "NotAllowedError") {
      current = null;
      release();
      reset(button);
      say(button, "The browser did not allow the audio to play.");
    }
    // Other rejections (an aborted load, an unplayable source) are reported by "error".
  });
}

document.addEventListener("click", (event) => {
  const target = event.target;
  if (!(target instanceof Element)) return;
  const button = target.closest("button.read-aloud");
  if (!button) return;
  if (current && current.url === button.dataset.speechUrl) stop();
  else start(button);
});
