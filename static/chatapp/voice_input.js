// Voice input: the composer's microphone records (MediaRecorder), shows the time recorded and the
// level heard (an AnalyserNode of Web Audio), and on Stop sends the recording once to the server
// (`chatapp/views/transcription.py`), whose gateway writes it out; the text goes into the message
// box to edit and send, or is sent at once when "Send at once" is ticked (kept in this browser).
//
// Every way it can fail says so in words by the button (`.voice-note`): a refused or missing
// microphone, a page where recording is not allowed, a recording too long (it stops itself at
// the server's limit) or too large, and whatever the server says (no gateway transcribes, a
// spending limit, the gateway's refusal).

import { messageWords, recordingType, timeWords } from "./voice_words.js";

const SEND_AT_ONCE = "chat.voice.sendAtOnce";

let recording = null; // {button, recorder, stream, context, chunks, started, frame, type}

function parts(button) {
  const row = button.closest(".composer-row");
  return {
    panel: row.querySelector(".voice-panel"),
    elapsed: row.querySelector(".voice-elapsed"),
    meter: row.querySelector(".voice-meter"),
    note: row.querySelector(".voice-note"),
    label: button.querySelector(".voice-label"),
  };
}

function say(button, words, { error = true } = {}) {
  const { note } = parts(button);
  note.textContent = words;
  note.classList.toggle("error", error);
}

function showRecording(button, on) {
  const { panel, label } = parts(button);
  button.setAttribute("aria-pressed", on ? "true" : "false");
  button.classList.toggle("recording", on);
  label.textContent = on ? "Stop recording" : "Speak";
  button.title = on ? "Stop recording and write it into the box" : button.dataset.idleTitle;
  panel.hidden = !on;
}

// The level: how far the loudest sample of the last frame strays from silence, 0 to 100.
function level(analyser, samples) {
  analyser.getByteTimeDomainData(samples);
  let peak = 0;
  for (const sample of samples) peak = Math.max(peak, Math.abs(sample - 128));
  return Math.min(100, Math.round((peak / 128) * 100 * 1.5));
}

function watch(state, analyser) {
  const { elapsed, meter } = parts(state.button);
  const samples = new Uint8Array(analyser.fftSize);
  const limit = Number(state.button.dataset.maxSeconds);
  const tick = () => {
    if (recording !== state) return;
    const seconds = (performance.now() - state.started) / 1000;
    elapsed.textContent = timeWords(seconds);
    const value = level(analyser, samples);
    meter.setAttribute("aria-valuenow", String(value));
    meter.firstElementChild.style.width = `${value}%`;
    if (seconds >= limit) {
      state.stoppedAtLimit = true;
      stop();
      return;
    }
    state.frame = requestAnimationFrame(tick);
  };
  state.frame = requestAnimationFrame(tick);
}

async function start(button) {
  if (!button.dataset.idleTitle) button.dataset.idleTitle = button.title;
  say(button, "", { error: false });
  if (!navigator.mediaDevices?.getUserMedia || !window.MediaRecorder) {
    say(button, messageWords({ name: "NotSupportedError" }));
    return;
  }
  // Made within the click, before anything is awaited: one made later may start suspended
  // (the browser's autoplay rule), and its meter would show nothing.
  const context = new AudioContext();
  let stream;
  button.disabled = true;
  try {
    stream = await navigator.mediaDevices.getUserMedia({ audio: true });
  } catch (error) {
    context.close();
    say(button, messageWords(error));
    return;
  } finally {
    button.disabled = false;
  }
  if (context.state === "suspended") context.resume();
  const type = recordingType((candidate) => MediaRecorder.isTypeSupported(candidate));
  const recorder = new MediaRecorder(stream, type ? { mimeType: type } : {});
  const analyser = context.createAnalyser();
  analyser.fftSize = 1024;
  context.createMediaStreamSource(stream).connect(analyser);
  const state = { button, recorder, stream, context, chunks: [], started: performance.now() };
  recorder.addEventListener("dataavailable", (event) => {
    if (event.data.size) state.chunks.push(event.data);
  });
  recorder.addEventListener("stop", () => finish(state), { once: true });
  recording = state;
  recorder.start();
  showRecording(button, true);
  watch(state, analyser);
}

function stop() {
  const state = recording;
  if (!state) return;
  recording = null;
  cancelAnimationFrame(state.frame);
  state.seconds = (performance.now() - state.started) / 1000;
  if (state.recorder.state !== "inactive") state.recorder.stop(); // its last data, then `stop`
  for (const track of state.stream.getTracks()) track.stop();
  state.context.close();
  showRecording(state.button, false);
}

async function finish(state) {
  const { button } = state;
  if (!button.isConnected) return; // the page went elsewhere: nothing is sent
  const type = (state.recorder.mimeType || state.chunks[0]?.type || "audio/webm").split(";")[0];
  const audio = new Blob(state.chunks, { type });
  const limit = Number(button.dataset.maxSeconds);
  if (!audio.size) {
    say(button, "Nothing was recorded: the microphone sent no sound.");
    return;
  }
  if (audio.size > Number(button.dataset.maxBytes)) {
    say(button, "The recording is too large to send: record a shorter one.");
    return;
  }
  const reached = state.stoppedAtLimit ? `Stopped at the ${timeWords(limit)} limit. ` : "";
  say(button, `${reached}Writing out what you said…`, { error: false });
  const form = button.closest("form");
  const body = new FormData();
  body.append("audio", audio, `voice.${type.split("/")[1] || "webm"}`);
  body.append("seconds", state.seconds.toFixed(2));
  if (button.dataset.conversation) body.append("conversation", button.dataset.conversation);
  const token = form.querySelector('input[name="csrfmiddlewaretoken"]')?.value || "";
  button.disabled = true;
  let answer;
  try {
    const response = await fetch(button.dataset.voiceUrl, {
      method: "POST",
      body,
      headers: { "X-CSRFToken": token },
      credentials: "same-origin",
    });
    answer = await response.json().catch(() => ({
      error: `The server answered ${response.status} ${response.statusText}`.trim(),
    }));
  } catch {
    answer = { error: "The server could not be reached: the recording was not written out." };
  } finally {
    button.disabled = false;
  }
  if (!answer.text) {
    say(button, answer.error || "Nothing came back for the recording.");
    return;
  }
  say(button, reached.trim(), { error: false });
  place(form, answer.text);
}

function place(form, text) {
  const box = form.querySelector("#message");
  if (!box) return;
  box.value = box.value.trim() ? `${box.value.trimEnd()} ${text}` : text;
  box.dispatchEvent(new Event("input", { bubbles: true }));
  const atOnce = form.querySelector("[data-voice-send]");
  if (atOnce?.checked) form.requestSubmit();
  else {
    box.focus();
    box.setSelectionRange(box.value.length, box.value.length);
  }
}

document.addEventListener("click", (event) => {
  const button = event.target.closest && event.target.closest("#composer .voice-button");
  if (!button) return;
  if (recording?.button === button) stop();
  else if (!recording) start(button);
});

document.addEventListener("change", (event) => {
  if (event.target.matches?.("[data-voice-send]")) {
    localStorage.setItem(SEND_AT_ONCE, event.target.checked ? "1" : "");
  }
});

// The option as this browser last left it, on every composer drawn (a page, a swap).
function restore(root) {
  for (const box of (root.querySelectorAll ? root : document).querySelectorAll("[data-voice-send]")) {
    box.checked = localStorage.getItem(SEND_AT_ONCE) === "1";
  }
}
document.addEventListener("DOMContentLoaded", () => restore(document));
document.addEventListener("htmx:load", (event) => restore(event.target));
// A page swapped away while recording (the sidebar's links): the microphone is let go.
document.addEventListener("htmx:beforeSwap", () => {
  if (recording && !document.body.contains(recording.button)) stop();
});
document.addEventListener("htmx:afterSwap", () => {
  if (recording && !recording.button.isConnected) stop();
});
