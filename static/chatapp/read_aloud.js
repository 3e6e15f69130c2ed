// Read aloud: an answer's "Read aloud" button plays its speech as the bytes arrive.
//
// One <audio> element for the page (one reading at a time), pointed at the answer's speech URL:
// the browser streams it and starts playing before the whole file is in. Stop pauses it and
// drops its src, which aborts the request: the server sees the disconnect and closes the
// gateway's request (chatapp/read_aloud/stream.py). The audio's own events carry no words, so when
// a reading ends or fails the page asks the server what became of it (the gateway's record
// decides whether the audio was whole) and says so next to the button.
//
// While it reads, Pause holds the audio where it is (the request stays open and the bytes keep
// arriving, so Resume goes on from the same place) and a slider shows the position: elapsed, and
// the total once the browser knows it (a WAV still arriving may have none: Infinity in Chromium).
// The slider seeks within what the browser says is seekable; a stored read aloud is served with
// byte ranges, so all of it is.
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
  player.addEventListener("waiting", () => {
    if (!player.paused) show("loading");
  });
  player.addEventListener("pause", () => {
    if (current && !player.ended && player.getAttribute("src")) show("paused");
  });
  for (const name of ["timeupdate", "durationchange", "loadedmetadata", "progress", "seeked"]) {
    player.addEventListener(name, position);
  }
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
    if (button.dataset.readAloudUrl === reading.url) return button;
  }
  return null;
}

function noteOf(button) {
  let note = button.parentElement.querySelector(":scope > .read-aloud-note");
  if (!note) {
    note = document.createElement("span");
    note.className = "read-aloud-note";
    note.setAttribute("role", "status");
    button.after(note);
  }
  return note;
}

// "0:07", "1:02:05": a time in seconds as a person reads it.
function clock(seconds) {
  const whole = Math.max(0, Math.floor(Number.isFinite(seconds) ? seconds : 0));
  const s = String(whole % 60).padStart(2, "0");
  const minutes = Math.floor(whole / 60);
  if (minutes < 60) return `${minutes}:${s}`;
  return `${Math.floor(minutes / 60)}:${String(minutes % 60).padStart(2, "0")}:${s}`;
}

// The end of what can be sought to now: of the seekable part when the total is known, else of
// what has arrived.
function seekableEnd(audio) {
  const ranges = Number.isFinite(audio.duration) ? audio.seekable : audio.buffered;
  return ranges.length ? ranges.end(ranges.length - 1) : 0;
}

// Pause, the slider and the time: a row of their own under the answer's footer.
function controlsOf(button, make = true) {
  const footer = button.closest(".message-footer") || button.parentElement;
  let controls = footer.nextElementSibling;
  if (controls && controls.classList.contains("read-aloud-controls")) return controls;
  if (!make) return null;
  controls = document.createElement("div");
  controls.className = "read-aloud-controls";
  controls.setAttribute("role", "group");
  controls.setAttribute("aria-label", "Reading aloud");
  const pause = document.createElement("button");
  pause.type = "button";
  pause.className = "read-aloud-pause";
  pause.textContent = "Pause";
  const seek = document.createElement("input");
  seek.type = "range";
  seek.className = "read-aloud-seek";
  seek.min = "0";
  seek.max = "0";
  seek.step = "1"; // an arrow key moves a second
  seek.value = "0";
  seek.setAttribute("aria-label", "Position in the reading");
  const time = document.createElement("span");
  time.className = "read-aloud-position";
  time.setAttribute("aria-hidden", "true"); // the slider's value text says the same
  controls.append(pause, seek, time);
  footer.after(controls);
  return controls;
}

// The position of the reading: elapsed, "/ total" once the total is known.
function position() {
  const button = buttonOf(current);
  if (!button) return;
  const controls = controlsOf(button);
  const audio = audioElement();
  const elapsed = audio.currentTime;
  const total = Number.isFinite(audio.duration) && audio.duration > 0 ? audio.duration : null;
  const text = total === null ? clock(elapsed) : `${clock(elapsed)} / ${clock(total)}`;
  const time = controls.querySelector(".read-aloud-position");
  if (time.textContent !== text) time.textContent = text;
  const seek = controls.querySelector(".read-aloud-seek");
  const end = seekableEnd(audio);
  seek.max = String(Math.max(end, elapsed));
  if (!seek.matches(":active")) seek.value = String(elapsed); // not under a dragging pointer
  seek.disabled = end <= 0;
  const spoken =
    total === null ? `${clock(elapsed)} elapsed` : `${clock(elapsed)} of ${clock(total)}`;
  if (seek.getAttribute("aria-valuetext") !== spoken) seek.setAttribute("aria-valuetext", spoken);
}

function within(ranges, value) {
  for (let i = 0; i < ranges.length; i += 1) {
    if (value >= ranges.start(i) && value <= ranges.end(i)) return true;
  }
  return false;
}

// Within what the browser can seek to and, while the total is unknown, what has arrived
// (Chromium calls a WAV still streaming seekable to Infinity).
function seekTo(value) {
  const audio = audioElement();
  const known = Number.isFinite(audio.duration);
  if (within(audio.seekable, value) && (known || within(audio.buffered, value))) {
    audio.currentTime = value;
  }
  position(); // the slider shows where the audio is
}

function togglePause() {
  const audio = audioElement();
  if (!current) return;
  if (audio.paused) {
    audio.play().catch(() => {}); // a failure is reported by "error"
  } else {
    audio.pause();
  }
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
  const shown = controlsOf(button, false) !== null;
  const controls = controlsOf(button);
  const pause = controls.querySelector(".read-aloud-pause");
  pause.textContent = state === "paused" ? "Resume" : "Pause";
  position();
  say(button, { loading: "Loading the audio…", paused: "Paused." }[state] || "");
  // New under the last answer, they would be below the messages' visible end (the note above
  // may have made the footer taller too): brought into view once, as they appear.
  if (!shown) controls.scrollIntoView({ block: "nearest" });
}

function reset(button) {
  if (!button) return;
  delete button.dataset.reading;
  button.textContent = "Read aloud";
  const controls = controlsOf(button, false);
  if (!controls) return;
  const focused = controls.contains(document.activeElement);
  controls.remove();
  if (focused) button.focus(); // the keyboard's place is not lost with the controls
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
  const url = button.dataset.readAloudUrl;
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
  if (target.closest("button.read-aloud-pause")) {
    togglePause();
    return;
  }
  const button = target.closest("button.read-aloud");
  if (!button) return;
  if (current && current.url === button.dataset.readAloudUrl) stop();
  else start(button);
});

document.addEventListener("input", (event) => {
  const target = event.target;
  if (target instanceof HTMLInputElement && target.matches("input.read-aloud-seek") && current) {
    seekTo(Number(target.value));
  }
});
