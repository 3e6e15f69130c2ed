// static/chatapp/prompt_text.js: the name typed after "/", the prompts it matches, and variables.

import assert from "node:assert/strict";
import { test } from "node:test";

import { fill, matching, typedName } from "../../static/chatapp/prompt_text.js";

test("a name is typed only when the whole box is a slash and the start of one", () => {
  assert.equal(typedName("/"), "");
  assert.equal(typedName("/Tr"), "tr");
  assert.equal(typedName("/two words"), null);
  assert.equal(typedName("see /tr"), null);
  assert.equal(typedName("/tr\n"), null);
  assert.equal(typedName(""), null);
});

test("names starting with what is typed come first, then those holding it", () => {
  const entries = ["summarize", "translate", "tldr", "attr"].map((name) => ({ name }));
  assert.deepEqual(
    matching(entries, "t").map((entry) => entry.name),
    ["translate", "tldr", "attr"],
  );
  assert.deepEqual(matching(entries, "", 2).map((entry) => entry.name), ["summarize", "translate"]);
  assert.deepEqual(matching(entries, "zz"), []);
});

test("each variable is filled everywhere, values as written, the others left", () => {
  const text = "Into {{ language }}: {{text}}, {{language}} again; {{other}} {{not valid!}}";
  assert.equal(
    fill(text, { language: "French", text: "$1 {{other}}" }),
    "Into French: $1 {{other}}, French again; {{other}} {{not valid!}}",
  );
});
