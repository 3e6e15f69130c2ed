// An answer's [1], [2] that cite the passages its context quoted (rendering/markdown.py's
// `passage-ref` links) open the passage in a dialog: its file, its page or heading, and its text,
// copied as text from the list under the answer (_message.html) that the link names. A modal
// dialog: the focus goes to its Close button, Esc or Close shuts it, and the focus goes back to
// the mark. Without this script the link opens that list and goes to the passage.

function passageDialog() {
  for (const stale of document.querySelectorAll("dialog.passage-dialog")) stale.remove();
  const dialog = document.createElement("dialog");
  dialog.className = "passage-dialog";
  dialog.setAttribute("aria-labelledby", "passage-dialog-title");
  document.body.append(dialog);
  dialog.addEventListener("close", () => dialog.remove());
  return dialog;
}

function open(link, item) {
  const opener = link;
  const dialog = passageDialog();
  const title = document.createElement("h2");
  title.id = "passage-dialog-title";
  title.textContent = `[${link.textContent.replace(/\D/g, "")}] ${item.querySelector(".passage-source")?.textContent.trim() || ""}`;
  const text = document.createElement("blockquote");
  text.className = "passage-text";
  text.textContent = item.querySelector(".passage-text")?.textContent || "";
  const close = document.createElement("button");
  close.type = "button";
  close.className = "primary";
  close.textContent = "Close";
  close.addEventListener("click", () => dialog.close());
  const actions = document.createElement("div");
  actions.className = "passage-dialog-actions";
  actions.append(close);
  dialog.append(title, text, actions);
  dialog.addEventListener("close", () => opener.isConnected && opener.focus());
  dialog.showModal();
  close.focus();
}

document.addEventListener("click", (event) => {
  const link = event.target.closest?.("a.passage-ref");
  if (!link || event.defaultPrevented || event.ctrlKey || event.metaKey || event.shiftKey) return;
  const id = decodeURIComponent(link.hash.slice(1));
  const item = id && document.getElementById(id);
  if (!item?.matches("li.passage")) return; // not on this page: the link does what links do
  event.preventDefault();
  open(link, item);
});
