// Share links: Copy beside a link just made (templates/chatapp/shared/_created.html) puts its
// address on the clipboard.
//
// The listener is delegated on the document: the link arrives by htmx, after the page loaded.
// The address is selected first, so that where the clipboard is refused (a page served over plain
// http to another machine has no `navigator.clipboard`) Ctrl+C still copies it.

const FEEDBACK_MS = 1500;

async function copy(input) {
  input.focus();
  input.select();
  try {
    await navigator.clipboard.writeText(input.value);
    return;
  } catch {
    // No clipboard API here, or it refused: the older command copies the selection.
  }
  if (!document.execCommand("copy")) throw new Error("copy refused");
}

document.addEventListener("click", async (event) => {
  const button = event.target instanceof Element && event.target.closest("button.copy-link");
  if (!button) return;
  const input = document.getElementById(button.dataset.copyFrom || "");
  if (!(input instanceof HTMLInputElement)) return;
  let outcome = "Copied";
  try {
    await copy(input);
  } catch {
    outcome = "Copy failed";
  }
  button.textContent = outcome;
  button.dataset.outcome = outcome === "Copied" ? "copied" : "failed";
  clearTimeout(Number(button.dataset.timer));
  button.dataset.timer = String(
    setTimeout(() => {
      button.textContent = "Copy";
      delete button.dataset.outcome;
    }, FEEDBACK_MS),
  );
});
