// A collection's "Add files": files over the size a file may have are refused as they are chosen,
// in the words the server uses, before the browser sends them. A body past the server's bound
// (`access/body_limits.py`) is cut off while it arrives, and the page is then left for a bare 413
// that says nothing of which file or what to do.

function refusal(input) {
  const max = Number(input.dataset.maxBytes);
  const words = input.dataset.maxWords;
  const files = [...input.files];
  const large = files.find((file) => file.size > max);
  if (large) return `${large.name} is larger than ${words}.`;
  const total = files.reduce((sum, file) => sum + file.size, 0);
  if (total > max) return `Together these files are over ${words}: add them a few at a time.`;
  return "";
}

document.addEventListener("change", (event) => {
  const input = event.target;
  if (!(input instanceof HTMLInputElement) || !input.matches("input[type=file][data-max-bytes]")) return;
  input.setCustomValidity(refusal(input));
  input.reportValidity();
});
