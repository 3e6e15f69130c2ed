// One polite status line (#answer-status) tells a screen reader that an answer started, finished
// or was stopped, in a few words. The answers themselves are no live regions: one would read a
// whole answer when it ends, and every finished answer would stay one. A failure is said by the
// answer's own alert. Each answer is announced once when it starts and once when it ends, and
// only if it started while this page watched (a cost reconciled later says nothing).

const WORDS = {
  streaming: "Writing an answer…",
  completed: "Answer finished.",
  cancelled: "Answer stopped.",
};
const started = new Set(); // generation ids announced as started
const ended = new Set(); // and as ended (or ending silently: a round the turn goes on from)

function say(words) {
  const line = document.getElementById("answer-status");
  if (line) line.textContent = words;
}

// `quietly`: it was already being written when the page loaded, which is no news; its end is.
export function answerStarted(id, quietly = false) {
  if (started.has(id)) return;
  started.add(id);
  if (!quietly) say(WORDS.streaming);
}

// `el`'s final render is in: its status says how it ended.
export function answerRendered(el) {
  const id = Number(el.dataset.generation);
  if (!started.has(id) || ended.has(id) || el.dataset.status === "streaming") return;
  ended.add(id);
  if (WORDS[el.dataset.status]) say(WORDS[el.dataset.status]);
}

// A tool round whose turn goes on: its end is no news, the next round's start is.
export function answerContinues(id) {
  ended.add(id);
}
