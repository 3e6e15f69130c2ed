// Which models a filter typed above the picker leaves in it: pure functions, for model_picker.js
// and tests/js/model_filter.test.mjs.
//
// Every word typed must appear, in any order and either case, in what a person reads of the model
// (its label, its section's label) or in its ID, so "gpt lite" finds "gpt-4o (LiteLLM)".

export function words(query) {
  return String(query ?? "")
    .toLowerCase()
    .split(/\s+/)
    .filter(Boolean);
}

export function matches(query, ...texts) {
  const haystack = texts.join(" ").toLowerCase();
  return words(query).every((word) => haystack.includes(word));
}

// The choice to show as picked once the list holds `shown` (picker values, in order): `current`
// if it is still there, else the first shown; "" when none is.
export function keptChoice(current, shown) {
  return shown.includes(current) ? current : (shown[0] ?? "");
}

// The choice `step` (+1 or -1) from `current` among `shown`, stopping at either end.
export function steppedChoice(current, shown, step) {
  if (!shown.length) return "";
  const at = shown.indexOf(current);
  if (at === -1) return shown[0];
  return shown[Math.min(shown.length - 1, Math.max(0, at + step))];
}
