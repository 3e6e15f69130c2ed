// static/chatapp/stream_state.js against the vectors of tests/vectors/stream/ (their README says
// what a vector holds); chatapp/ws/page_model.py passes the same ones.

import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { test } from "node:test";

import {
  afterWatch,
  fromWire,
  messagesFromWire,
  receive,
  refuseSettle,
  start,
  tailOf,
  watchSent,
} from "../../static/chatapp/stream_state.js";

const VECTORS = new URL("../vectors/stream/", import.meta.url);

function pageOf(page) {
  return start({
    g: page.g,
    seq: page.seq ?? 0,
    settledEnd: page.settled_end ?? 0,
    tail: page.tail ?? "",
    reasoning: page.reasoning ?? "",
  });
}

// A frame's messages for this answer, in order, as chat.js dispatches them by `g`.
function receiveFrame(state, parsed, at) {
  const effects = [];
  for (const msg of messagesFromWire(parsed)) {
    if (msg.g !== state.g) continue;
    const result = receive(state, msg, at);
    state = result.state;
    effects.push(...result.effects);
  }
  return { state, effects };
}

// One step as the page takes it: the machine's effects, a refused join carried out as chat.js
// does (the settles after it left out).
function run(state, step) {
  let result;
  if ("in" in step) result = receiveFrame(state, step.in, step.at);
  else if ("watch_check" in step) result = afterWatch(state, step.watch_check, step.at);
  else if (step.watch) result = watchSent(state, step.at);
  else throw new Error(`a step with no input: ${JSON.stringify(step)}`);
  const effects = [];
  let refused = false;
  let current = result.state;
  for (const effect of result.effects) {
    if (effect.do === "append" && effect.settle) {
      if (refused) {
        effects.push({ ...effect, settle: null, draft: null });
        continue;
      }
      if (step.refuse_join && effect.settle.join) {
        refused = true;
        effects.push({ ...effect, settle: null, draft: null });
        const refusal = refuseSettle(current, effect.settle, step.at);
        current = refusal.state;
        effects.push(...refusal.effects);
        continue;
      }
    }
    effects.push(effect);
  }
  if (step.refuse_join) assert.ok(refused, "the step has a joining settle to refuse");
  return { state: current, effects };
}

function shownOf(state) {
  return {
    seq: state.seq,
    content: state.content,
    offset: state.offset,
    settled_end: state.settledEnd,
    tail: tailOf(state),
    reasoning: state.reasoning,
    held: [...state.held.keys()].sort((a, b) => a - b),
    draft: state.draft && [state.draft.start, state.draft.end],
    done: state.done,
  };
}

function observed(effects, state) {
  const of = (kind) => effects.filter((effect) => effect.do === kind);
  return {
    sends: of("send").map((effect) => effect.message),
    applied: of("append").map((effect) => effect.delta.seq),
    settles: of("append")
      .filter((effect) => effect.settle)
      .map(({ settle }) => ({ ...settle })),
    replaced: of("replace").map((effect) => effect.snapshot.seq),
    // What each applied delta or snapshot does to the draft shown: "kept", null (it goes), or
    // the draft that takes its place.
    drafts: effects
      .filter((effect) => effect.do === "append" || effect.do === "replace")
      .map((effect) => (effect.draft === undefined ? "kept" : effect.draft && { ...effect.draft })),
    finished: of("finish").map((effect) => effect.done.status),
    refreshes: of("refresh").length,
    shown: shownOf(state),
  };
}

const KEYS = ["sends", "applied", "settles", "drafts", "replaced", "finished", "refreshes"];
const files = readdirSync(VECTORS).filter((name) => name.endsWith(".json"));

test("there are vectors", () => assert.ok(files.length >= 10));

for (const name of files.sort()) {
  const vector = JSON.parse(readFileSync(new URL(name, VECTORS), "utf8"));
  test(`${name}: ${vector.about}`, () => {
    let state = pageOf(vector.page);
    vector.steps.forEach((step, index) => {
      const result = run(state, step);
      state = result.state;
      const seen = observed(result.effects, state);
      const where = `${name} step ${index} (at ${step.at})`;
      for (const key of KEYS) {
        if (key in step) assert.deepEqual(seen[key], step[key], `${where}: ${key}`);
      }
      for (const [key, value] of Object.entries(step.shown || {})) {
        assert.ok(key in seen.shown, `${where}: no such shown key ${key}`);
        assert.deepEqual(seen.shown[key], value, `${where}: shown ${key}`);
      }
    });
  });
}

test("a frame of several deltas: each off the wire, in order", () => {
  assert.deepEqual(messagesFromWire([[3, 1, "a"], [4, 7, "", "why"]]), [
    { t: "delta", g: 3, seq: 1, content: "a" },
    { t: "delta", g: 4, seq: 7, content: "", reasoning: "why" },
  ]);
  assert.deepEqual(messagesFromWire([3, 1, "a"]), [{ t: "delta", g: 3, seq: 1, content: "a" }]);
  assert.deepEqual(messagesFromWire({ t: "done", g: 3, seq: 2 }), [{ t: "done", g: 3, seq: 2 }]);
});

test("a step returns a new state and leaves the one given as it was", () => {
  const before = start({ g: 1 });
  const { state } = receive(before, fromWire([1, 2, "b"]), 1000);
  assert.deepEqual([before.seq, before.held.size, before.askedAt], [0, 0, null]);
  assert.deepEqual([...state.held.keys()], [2]);
  assert.equal(state.askedAt, 1000);
});

test("a delta off the wire: a bare array, its trailing empty parts left out", () => {
  assert.deepEqual(fromWire([3, 1, "a"]), { t: "delta", g: 3, seq: 1, content: "a" });
  assert.deepEqual(fromWire([3, 2, "", "why", { settled: [0, 1, "<p>a</p>"] }]), {
    t: "delta",
    g: 3,
    seq: 2,
    content: "",
    reasoning: "why",
    settled: [0, 1, "<p>a</p>"],
  });
  assert.deepEqual(fromWire({ t: "done", g: 3, seq: 2 }), { t: "done", g: 3, seq: 2 });
});
