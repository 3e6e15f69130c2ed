// static/chatapp/model_filter.js: which models a typed filter leaves in the picker.

import assert from "node:assert/strict";
import { test } from "node:test";

import { keptChoice, matches, steppedChoice, words } from "../../static/chatapp/model_filter.js";

test("every word must appear, in any order and either case", () => {
  assert.ok(matches("gpt lite", "gpt-4o (LiteLLM)", "LiteLLM · openai"));
  assert.ok(matches("LITELLM GPT", "gpt-4o (LiteLLM)"));
  assert.ok(!matches("gpt claude", "gpt-4o (LiteLLM)"));
});

test("the section label and the ID count as well as the label", () => {
  assert.ok(matches("anthropic", "claude-sonnet (LiteLLM)", "LiteLLM · anthropic", "g2:claude"));
  assert.ok(matches("emulator/tools", "Emulator: tools", "Numes", "g1:emulator/tools"));
});

test("an empty or blank filter leaves everything", () => {
  for (const query of ["", "   ", null, undefined]) {
    assert.deepEqual(words(query), []);
    assert.ok(matches(query, "anything"));
  }
});

test("the choice stays when it is still shown, else the first shown is picked", () => {
  assert.equal(keptChoice("b", ["a", "b"]), "b");
  assert.equal(keptChoice("c", ["a", "b"]), "a");
  assert.equal(keptChoice("c", []), "");
});

test("arrow keys step through the choices shown and stop at either end", () => {
  const shown = ["a", "b", "c"];
  assert.equal(steppedChoice("a", shown, 1), "b");
  assert.equal(steppedChoice("c", shown, 1), "c");
  assert.equal(steppedChoice("a", shown, -1), "a");
  assert.equal(steppedChoice("x", shown, 1), "a");
  assert.equal(steppedChoice("a", [], 1), "");
});
