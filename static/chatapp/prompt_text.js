// A saved prompt's name typed after "/" and its {{variables}}: pure functions, for prompts.js and
// tests/js/prompt_text.test.mjs. The variable pattern is `chatapp/assistants/prompt_text.py`'s.

const VARIABLE = /\{\{\s*([A-Za-z0-9_][A-Za-z0-9_ -]{0,39}?)\s*\}\}/g;
const TYPED = /^\/([A-Za-z0-9_-]*)$/;

// The name being typed when the whole box is "/" and the start of a name; null otherwise.
export function typedName(value) {
  const found = TYPED.exec(String(value ?? ""));
  return found ? found[1].toLowerCase() : null;
}

// The prompts whose names start with `typed`, then those holding it elsewhere, at most `limit`.
export function matching(entries, typed, limit = 8) {
  const starts = entries.filter((entry) => entry.name.startsWith(typed));
  const within = entries.filter((entry) => !entry.name.startsWith(typed) && entry.name.includes(typed));
  return [...starts, ...within].slice(0, limit);
}

// `text` with each variable named in `values` replaced by its value, taken as written (a "$1"
// or a "{{b}}" in a value stays as it is); the others stay.
export function fill(text, values) {
  return text.replace(VARIABLE, (whole, name) => {
    const key = name.trim();
    return Object.hasOwn(values, key) ? values[key] : whole;
  });
}
