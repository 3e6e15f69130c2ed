// Tools on answers: Copy on a code block (its code) and on a finished answer (its markdown, from
// the server), and a lightbox that shows an answer's image larger.
//
// Every listener is delegated on the document, so answers that chat.js patches in later need no
// setup. The answer's markdown is fetched inside `ClipboardItem`, so the copy still counts as
// the click's (browsers allow a clipboard write only during a user gesture).

const ZOOMABLE = ".message .content img, .message .attachments img.image";
const FEEDBACK_MS = 1500;
const restoreTimers = new WeakMap(); // button -> timer that puts its label back

function showOutcome(button, text) {
  if (!restoreTimers.has(button)) {
    button.dataset.label = button.textContent;
    const name = button.getAttribute("aria-label");
    if (name) button.dataset.ariaLabel = name;
  }
  clearTimeout(restoreTimers.get(button));
  button.textContent = text;
  if (button.dataset.ariaLabel) button.setAttribute("aria-label", text);
  button.dataset.outcome = text === "Copied" ? "copied" : "failed";
  restoreTimers.set(
    button,
    setTimeout(() => {
      restoreTimers.delete(button);
      button.textContent = button.dataset.label;
      const name = button.dataset.ariaLabel;
      if (name) button.setAttribute("aria-label", name);
      delete button.dataset.outcome;
    }, FEEDBACK_MS),
  );
}

async function copyCode(button) {
  const code = button.closest(".code-block")?.querySelector("pre code");
  if (!code) throw new Error("no code block");
  // The block's text ends with the newline before its closing fence; the copy does not.
  await navigator.clipboard.writeText(code.textContent.replace(/\n$/, ""));
}

async function sourceText(url) {
  const response = await fetch(url, { credentials: "same-origin" });
  if (!response.ok) throw new Error(`HTTP ${response.status}`);
  return response.text();
}

async function copyAnswer(button) {
  const url = button.dataset.sourceUrl;
  if (!url || !url.startsWith("/") || url.startsWith("//")) throw new Error("no source URL");
  if (window.ClipboardItem && navigator.clipboard.write) {
    const blob = sourceText(url).then((text) => new Blob([text], { type: "text/plain" }));
    try {
      await navigator.clipboard.write([new ClipboardItem({ "text/plain": blob })]);
      return;
    } catch {
      // e.g. a browser without promises in ClipboardItem: fetch first, then write the text.
    }
  }
  await navigator.clipboard.writeText(await sourceText(url));
}

async function copyWith(button, copy) {
  try {
    await copy(button);
    showOutcome(button, "Copied");
  } catch {
    showOutcome(button, "Copy failed");
  }
}

// --- Lightbox --------------------------------------------------------------------------------

let lightbox = null;
let opener = null; // the image the lightbox shows, which gets the focus back
// The open picture's proportions and where the page header ends, as a rule of our own (CSSOM,
// which the CSP allows). Not a style attribute: htmx keeps the body's HTML for Back, and the CSP
// refuses the attribute when htmx puts that HTML back.
const sizing = new CSSStyleSheet();
document.adoptedStyleSheets = [...document.adoptedStyleSheets, sizing];

// The picture of `img` is centred in the screen below the header, so Close never lies on the
// header's controls.
function sizeLightbox(img) {
  const ratio = img.naturalWidth && img.naturalHeight ? img.naturalWidth / img.naturalHeight : 1;
  const header = document.querySelector(".chat-header");
  const top = Math.max(0, header ? header.getBoundingClientRect().bottom : 0);
  sizing.replaceSync(`dialog.lightbox { --ratio: ${ratio}; --top: ${top}px; }`);
}

function lightboxDialog() {
  if (lightbox?.isConnected) return lightbox;
  // A boosted link or Back replaced the body: a copy of the dialog that htmx put back for Back
  // has none of its listeners.
  for (const stale of document.querySelectorAll("dialog.lightbox")) stale.remove();
  const dialog = document.createElement("dialog");
  dialog.className = "lightbox";
  dialog.setAttribute("aria-label", "Image");
  const close = document.createElement("button");
  close.type = "button";
  close.className = "lightbox-close";
  close.textContent = "Close";
  const image = document.createElement("img");
  dialog.append(close, image);
  // A click on the backdrop lands on the dialog itself (its content is only the two children).
  dialog.addEventListener("click", (event) => {
    if (event.target === dialog || event.target === close) dialog.close();
  });
  dialog.addEventListener("close", () => {
    image.removeAttribute("src");
    if (opener && opener.isConnected) opener.focus();
    opener = null;
  });
  document.body.append(dialog);
  lightbox = dialog;
  return dialog;
}

function openLightbox(img) {
  const dialog = lightboxDialog();
  const image = dialog.querySelector("img");
  image.src = img.currentSrc || img.src;
  image.alt = img.alt;
  sizeLightbox(img);
  opener = img;
  dialog.showModal();
}

// A phone turned, or a window resized: the header's height changes with the width.
window.addEventListener("resize", () => {
  if (lightbox?.open && opener) sizeLightbox(opener);
});

// Answer images take the focus (Enter or Space opens them), so the lightbox can give it back.
function markZoomable(root) {
  const found = root.matches?.(ZOOMABLE) ? [root] : [...(root.querySelectorAll?.(ZOOMABLE) || [])];
  for (const img of found) {
    if (img.hasAttribute("tabindex")) continue;
    img.tabIndex = 0;
    img.setAttribute("aria-haspopup", "dialog");
  }
}

document.addEventListener("click", (event) => {
  const target = event.target;
  if (!(target instanceof Element)) return;
  const button = target.closest("button.copy-code, button.copy-answer");
  if (button) {
    copyWith(button, button.classList.contains("copy-code") ? copyCode : copyAnswer);
  } else if (target.matches(ZOOMABLE)) {
    openLightbox(target);
  }
});

document.addEventListener("keydown", (event) => {
  const target = event.target;
  if ((event.key === "Enter" || event.key === " ") && target instanceof Element) {
    if (target.matches(ZOOMABLE)) {
      event.preventDefault();
      openLightbox(target);
    }
  }
});

document.addEventListener("DOMContentLoaded", () => {
  markZoomable(document);
  new MutationObserver((changes) => {
    for (const change of changes) for (const node of change.addedNodes) markZoomable(node);
  }).observe(document.body, { childList: true, subtree: true });
});
