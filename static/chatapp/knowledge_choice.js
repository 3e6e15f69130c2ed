// The "#name" being typed in the message box and the collections and files it matches: pure
// functions, for knowledge_menu.js and tests/js/knowledge_choice.test.mjs.

// A "#" at the start or after a space, then letters, digits, ".", "-" or "_", ending at the caret.
const TYPED = /(^|\s)#([\p{L}\p{N}._-]*)$/u;

// {start, end, name} of the "#name" that ends at `caret` in `value`, or null when none does.
export function typedTag(value, caret) {
  const before = String(value ?? "").slice(0, caret);
  const found = TYPED.exec(before);
  if (!found) return null;
  const start = found.index + found[1].length;
  return { start, end: caret, name: found[2].toLowerCase() };
}

// `value` with the "#name" of `tag` taken out (and a space it leaves doubled), and where the
// caret goes.
export function withoutTag(value, tag) {
  let head = value.slice(0, tag.start);
  let tail = value.slice(tag.end);
  if (head.endsWith(" ") && (tail.startsWith(" ") || !tail)) head = head.slice(0, -1);
  if (!head) tail = tail.replace(/^ /, "");
  return { value: head + tail, caret: head.length };
}

// The entries (collections, then files) whose names start with `typed`, then those holding it
// elsewhere, leaving out those already `chosen` (keys "collection:1"), at most `limit`.
export function matchingSources(entries, typed, chosen = new Set(), limit = 8) {
  const open = entries.filter((entry) => !chosen.has(sourceKey(entry)));
  const name = (entry) => entry.name.toLowerCase();
  const starts = open.filter((entry) => name(entry).startsWith(typed));
  const within = open.filter((entry) => !name(entry).startsWith(typed) && name(entry).includes(typed));
  return [...starts, ...within].slice(0, limit);
}

export function sourceKey(entry) {
  return `${entry.kind}:${entry.id}`;
}
