// A Preview button on an answer's ```html and ```svg blocks: on a click (never by itself) the
// code is shown in a sandboxed frame (chatapp/views/code_frames.py: `sandbox="allow-scripts"`, never
// `allow-same-origin`, and a CSP that lets nothing load), where its scripts run apart from the
// app: no cookies, no storage, no way into the page or its socket, no request anywhere. The
// code reaches the frame by postMessage once it has loaded; a second click closes it.

import { codeOf, headButton, watchBlocks } from "./enhanced_blocks.js";

const frameUrl = document.querySelector('meta[name="chat-frames"]')?.dataset.preview;

function open(block, button) {
  const kind = block.dataset.preview === "svg" ? "SVG" : "HTML";
  const frame = document.createElement("iframe");
  frame.className = "preview-frame";
  frame.dataset.added = "";
  frame.setAttribute("sandbox", "allow-scripts");
  frame.title = `Preview of the ${kind}`;
  frame.addEventListener(
    "load",
    () => frame.contentWindow?.postMessage({ code: codeOf(block) }, "*"),
    { once: true },
  );
  frame.src = frameUrl;
  block.append(frame);
  button.textContent = "Close preview";
  button.setAttribute("aria-expanded", "true");
}

function close(block, button) {
  block.querySelector(":scope > iframe.preview-frame")?.remove();
  button.textContent = "Preview";
  button.setAttribute("aria-expanded", "false");
}

document.addEventListener("click", (event) => {
  const button = event.target.closest?.(".code-block[data-preview] .preview-toggle");
  if (!button) return;
  const block = button.closest(".code-block");
  if (block.querySelector(":scope > iframe.preview-frame")) close(block, button);
  else open(block, button);
});

if (frameUrl) {
  watchBlocks(".code-block[data-preview]", (block) => {
    const button = headButton(block, "preview-toggle", "Preview");
    button.setAttribute("aria-expanded", "false");
  });
}
