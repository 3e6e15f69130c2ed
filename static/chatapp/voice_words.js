// Voice input's words and choices, as pure functions (voice_input.js draws them): what a failure
// to open the microphone means for the person, the time recorded, and the recording's type.

// getUserMedia's and MediaRecorder's errors by name (a DOMException's `name`), in words that say
// what to do: LibreChat's users met a silent button (#3196, #7052).
const FAILURES = {
  NotAllowedError:
    "The microphone is blocked for this site: allow it in the browser (the icon at the left of " +
    "the address bar), then press Speak again.",
  SecurityError:
    "The browser does not allow recording on this page: it needs https (or localhost).",
  NotFoundError: "No microphone was found: connect one, then press Speak again.",
  OverconstrainedError: "No microphone was found: connect one, then press Speak again.",
  NotReadableError:
    "The microphone could not be started: another app may be using it. Close that, then try again.",
  AbortError: "The microphone could not be started. Try again.",
  NotSupportedError:
    "This browser cannot record audio here: it needs a secure page (https or localhost) and a " +
    "browser that records (Chromium, Firefox, Safari).",
};

export function messageWords(error) {
  return FAILURES[error?.name] ?? `The microphone could not be used: ${error?.message || error}.`;
}

// "0:07", "1:05", "2:00": minutes and seconds, whole seconds down.
export function timeWords(seconds) {
  const whole = Math.max(0, Math.floor(seconds));
  return `${Math.floor(whole / 60)}:${String(whole % 60).padStart(2, "0")}`;
}

// The first of the types a transcription endpoint takes that this browser records ("": let it
// choose): Chromium and Firefox record WebM or Ogg Opus, Safari MP4.
const TYPES = ["audio/webm;codecs=opus", "audio/webm", "audio/ogg;codecs=opus", "audio/mp4"];

export function recordingType(isSupported) {
  return TYPES.find((type) => isSupported(type)) ?? "";
}
