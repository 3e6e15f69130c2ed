import assert from "node:assert/strict";
import { test } from "node:test";

import { matchingSources, sourceKey, typedTag, withoutTag } from "../../static/chatapp/knowledge_choice.js";

test("a # at the start or after a space, ending at the caret, is a tag", () => {
  assert.deepEqual(typedTag("#Hand", 5), { start: 0, end: 5, name: "hand" });
  assert.deepEqual(typedTag("what does #hand", 15), { start: 10, end: 15, name: "hand" });
  assert.deepEqual(typedTag("see #", 5), { start: 4, end: 5, name: "" });
  assert.deepEqual(typedTag("#Handbook.pdf", 13), { start: 0, end: 13, name: "handbook.pdf" });
});

test("a # inside a word, or before the caret's word ends, is not", () => {
  assert.equal(typedTag("issue#4", 7), null);
  assert.equal(typedTag("#hand more", 10), null);
  assert.equal(typedTag("plain text", 10), null);
  assert.deepEqual(typedTag("#hand more", 5), { start: 0, end: 5, name: "hand" });
});

test("taking the tag out leaves one space and puts the caret where it was", () => {
  assert.deepEqual(withoutTag("what does #hand", typedTag("what does #hand", 15)), {
    value: "what does",
    caret: 9,
  });
  assert.deepEqual(withoutTag("#hand say", { start: 0, end: 5 }), { value: "say", caret: 0 });
  assert.deepEqual(withoutTag("a #h b", { start: 2, end: 4 }), { value: "a b", caret: 1 });
});

test("names starting with what is typed come first, chosen ones are left out", () => {
  const entries = [
    { kind: "collection", id: 1, name: "Handbook" },
    { kind: "file", id: 2, name: "Old handbook.pdf" },
    { kind: "file", id: 3, name: "handbook.md" },
    { kind: "collection", id: 4, name: "Recipes" },
  ];
  assert.deepEqual(
    matchingSources(entries, "hand").map(sourceKey),
    ["collection:1", "file:3", "file:2"],
  );
  assert.deepEqual(
    matchingSources(entries, "", new Set(["collection:1"])).map(sourceKey),
    ["file:2", "file:3", "collection:4"],
  );
});
