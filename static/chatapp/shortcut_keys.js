// The page's keyboard shortcuts, as one table, and which of them a key press asks for. Pure (no
// DOM), so tests/js checks it; shortcuts.js acts on it and lists the table in its dialog.
//
// "Mod" is Cmd on a Mac and Ctrl elsewhere, as in ChatGPT. A shortcut with Mod works while you
// type; one without (/ and ?) only when the focus is not in a field, so it never takes a
// character you meant to type; ↑ only in the message box while it is empty.

// What the dialog lists, in its order: `keys` holds the alternatives, each a list of keys. Rows
// without an `action` are keys the composer and the answers handle themselves (composer.js).
export const SHORTCUTS = [
  { action: "new-chat", label: "New chat", keys: [["Mod", "Shift", "O"]] },
  { action: "search", label: "Search conversations", keys: [["Mod", "K"], ["/"]] },
  { action: "edit-last", label: "Edit your last question (in the empty message box)", keys: [["↑"]] },
  { label: "Leave the edit", keys: [["Esc"]] },
  { label: "Send", keys: [["Enter"]] },
  { label: "New line", keys: [["Shift", "Enter"]] },
  { label: "Stop the answer being written", keys: [["Esc"]] },
  { action: "help", label: "Keyboard shortcuts", keys: [["Mod", "/"], ["?"]] },
];

// How a key is written for this platform.
export function keyLabel(key, { mac }) {
  if (key === "Mod") return mac ? "⌘" : "Ctrl";
  if (key === "Shift") return mac ? "⇧" : "Shift";
  return key;
}

// The action `event` (a KeyboardEvent's key and modifier flags) asks for, or null. `typing`: the
// focus is in a field; `emptyComposer`: it is in the message box, which holds nothing.
export function shortcutFor(event, { mac = false, typing = false, emptyComposer = false } = {}) {
  if (event.isComposing || event.altKey) return null;
  const key = typeof event.key === "string" ? event.key : "";
  const mod = mac ? event.metaKey && !event.ctrlKey : event.ctrlKey && !event.metaKey;
  if (mod) {
    const letter = key.toLowerCase();
    if (event.shiftKey && letter === "o") return "new-chat";
    if (!event.shiftKey && letter === "k") return "search";
    if (key === "/" || key === "?") return "help";
    return null;
  }
  if (event.ctrlKey || event.metaKey) return null;
  if (key === "ArrowUp" && !event.shiftKey) return emptyComposer ? "edit-last" : null;
  if (typing) return null;
  if (key === "/") return "search";
  if (key === "?") return "help";
  return null;
}
