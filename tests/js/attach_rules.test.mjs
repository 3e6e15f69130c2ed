// static/chatapp/attach_rules.js: the caps on files attached to a message, what a file's bytes
// say it is (from the vectors the server's tests pass too), and the image warning.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import {
  NOT_A_KIND,
  added,
  contentKind,
  imageWarning,
  kindRefusal,
  sizeWords,
} from "../../static/chatapp/attach_rules.js";

const KINDS = JSON.parse(
  readFileSync(new URL("../vectors/uploads/content_kinds.json", import.meta.url), "utf8"),
);

const file = (name, size, type = "text/plain") => ({ name, size, type });

test("files within the caps are kept in order", () => {
  const found = added([file("a.md", 10)], [file("b.png", 20, "image/png")]);
  assert.deepEqual(found.files.map((f) => f.name), ["a.md", "b.png"]);
  assert.deepEqual(found.refused, []);
});

test("a sixth file, a file over 4 MB and files over 5 MB together are refused in words", () => {
  const five = [1, 2, 3, 4, 5].map((n) => file(`f${n}.txt`, 1));
  assert.match(added(five, [file("six.txt", 1)]).refused[0], /at most 5 files/);
  assert.match(added([], [file("big.pdf", 4 * 1024 * 1024 + 1)]).refused[0], /big\.pdf is 4\.0 MB/);
  const two = added([file("a", 3 * 1024 * 1024)], [file("b", 3 * 1024 * 1024)]);
  assert.deepEqual(two.files.map((f) => f.name), ["a"]);
  assert.match(two.refused[0], /5 MB in all/);
});

test("an image to a model that does not take images is said before sending", () => {
  const files = [file("notes.md", 5), file("cat.png", 9, "image/png")];
  assert.equal(imageWarning(files, true, "x"), "");
  assert.equal(imageWarning([file("notes.md", 5)], false, "x"), "");
  assert.match(imageWarning(files, false, "Emulator: chat"), /^Emulator: chat does not take images \(cat\.png\)/);
  assert.equal(sizeWords(2048), "2.0 KB");
});

for (const vector of KINDS.vectors) {
  test(`a file's bytes: ${vector.about}`, () => {
    assert.equal(contentKind(new Uint8Array(Buffer.from(vector.hex, "hex")), true), vector.kind);
  });
}

test("a file refused by its bytes is said in the server's words", () => {
  assert.equal(NOT_A_KIND, KINDS.refused_words);
  assert.equal(kindRefusal(file("setup.exe", 9), null), `setup.exe is ${KINDS.refused_words}`);
  assert.equal(kindRefusal(file("notes.md", 9), "text"), "");
  assert.equal(kindRefusal(file("gone.txt", 9), undefined), ""); // unread: the server decides
});

test("a character cut at the end of a file's first bytes is no fault, at its true end it is", () => {
  const cut = new TextEncoder().encode("price: 5 €").slice(0, -1);
  assert.equal(contentKind(cut, false), "text");
  assert.equal(contentKind(cut, true), null);
});
