// static/chatapp/voice_words.js: a microphone's failures in words, the time recorded, and the
// type a recording is made in.

import assert from "node:assert/strict";
import { test } from "node:test";

import { messageWords, recordingType, timeWords } from "../../static/chatapp/voice_words.js";

test("each way the microphone fails says what to do", () => {
  assert.match(messageWords({ name: "NotAllowedError" }), /^The microphone is blocked/);
  assert.match(messageWords({ name: "NotFoundError" }), /^No microphone was found/);
  assert.match(messageWords({ name: "SecurityError" }), /needs https/);
  assert.equal(
    messageWords({ name: "WeirdError", message: "it broke" }),
    "The microphone could not be used: it broke.",
  );
});

test("the time recorded is minutes and whole seconds", () => {
  assert.equal(timeWords(0), "0:00");
  assert.equal(timeWords(7.9), "0:07");
  assert.equal(timeWords(65), "1:05");
  assert.equal(timeWords(120), "2:00");
});

test("a recording is made in the first type the browser records", () => {
  assert.equal(recordingType(() => true), "audio/webm;codecs=opus");
  assert.equal(recordingType((type) => type === "audio/mp4"), "audio/mp4");
  assert.equal(recordingType(() => false), "");
});
