// static/chatapp/shortcut_keys.js: which shortcut a key press asks for, on a Mac and elsewhere,
// typing in a field or not.

import assert from "node:assert/strict";
import { test } from "node:test";

import { SHORTCUTS, keyLabel, shortcutFor } from "../../static/chatapp/shortcut_keys.js";

const press = (key, modifiers = {}) => ({
  key,
  ctrlKey: false,
  metaKey: false,
  shiftKey: false,
  altKey: false,
  isComposing: false,
  ...modifiers,
});

test("Ctrl+Shift+O is a new chat elsewhere, Cmd+Shift+O on a Mac, typing or not", () => {
  for (const typing of [false, true]) {
    assert.equal(shortcutFor(press("O", { ctrlKey: true, shiftKey: true }), { typing }), "new-chat");
    assert.equal(
      shortcutFor(press("O", { metaKey: true, shiftKey: true }), { mac: true, typing }),
      "new-chat",
    );
  }
  // The other platform's modifier is not it: Ctrl+Shift+O on a Mac is left to the browser.
  assert.equal(shortcutFor(press("O", { ctrlKey: true, shiftKey: true }), { mac: true }), null);
  assert.equal(shortcutFor(press("O", { metaKey: true, shiftKey: true })), null);
  assert.equal(shortcutFor(press("o", { ctrlKey: true })), null, "Ctrl+O is the browser's");
});

test("Mod+K and / focus the search; / only when not typing", () => {
  assert.equal(shortcutFor(press("k", { ctrlKey: true }), { typing: true }), "search");
  assert.equal(shortcutFor(press("k", { metaKey: true }), { mac: true, typing: true }), "search");
  assert.equal(shortcutFor(press("/")), "search");
  assert.equal(shortcutFor(press("/"), { typing: true }), null);
  assert.equal(shortcutFor(press("K", { ctrlKey: true, shiftKey: true })), null);
});

test("? and Mod+/ open the list; ? only when not typing", () => {
  assert.equal(shortcutFor(press("?", { shiftKey: true })), "help");
  assert.equal(shortcutFor(press("?", { shiftKey: true }), { typing: true }), null);
  assert.equal(shortcutFor(press("/", { ctrlKey: true }), { typing: true }), "help");
  assert.equal(shortcutFor(press("/", { metaKey: true }), { mac: true }), "help");
});

test("↑ edits the last question only from the empty message box", () => {
  assert.equal(shortcutFor(press("ArrowUp"), { typing: true, emptyComposer: true }), "edit-last");
  assert.equal(shortcutFor(press("ArrowUp"), { typing: true }), null);
  assert.equal(shortcutFor(press("ArrowUp")), null);
  assert.equal(shortcutFor(press("ArrowUp", { shiftKey: true }), { emptyComposer: true }), null);
  assert.equal(shortcutFor(press("ArrowUp", { ctrlKey: true }), { emptyComposer: true }), null);
});

test("nothing while an input method composes, or with Alt", () => {
  assert.equal(shortcutFor(press("/", { isComposing: true })), null);
  assert.equal(shortcutFor(press("k", { ctrlKey: true, altKey: true })), null);
  assert.equal(shortcutFor(press("a")), null);
  assert.equal(shortcutFor(press("Enter")), null);
});

test("keys are written for the platform", () => {
  assert.equal(keyLabel("Mod", { mac: true }), "⌘");
  assert.equal(keyLabel("Mod", { mac: false }), "Ctrl");
  assert.equal(keyLabel("Shift", { mac: true }), "⇧");
  assert.equal(keyLabel("K", { mac: false }), "K");
});

test("every action the table lists is one a key press can ask for", () => {
  const listed = new Set(SHORTCUTS.map((shortcut) => shortcut.action).filter(Boolean));
  const asked = new Set(
    [
      shortcutFor(press("O", { ctrlKey: true, shiftKey: true })),
      shortcutFor(press("/")),
      shortcutFor(press("ArrowUp"), { emptyComposer: true }),
      shortcutFor(press("?")),
    ].filter(Boolean),
  );
  assert.deepEqual(listed, asked);
});
