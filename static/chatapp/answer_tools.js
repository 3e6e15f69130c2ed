// Tools on answers: Copy on a code block (its code) and on a finished answer (its markdown, from
// the server), and a lightbox that shows an answer's image larger, with Download and Copy.
//
// Every listener is delegated on the document, so answers that chat.js patches in later need no
// setup. The answer's markdown is fetched inside `ClipboardItem`, so the copy still counts as
// the click's (browsers allow a clipboard write only during a user gesture).

import { dataUrlBytes, downloadName } from "./image_files.js";

// Not a drawn diagram (diagrams.js): an SVG, which Download and Copy take only as a raster.
const ZOOMABLE =
  ".message .content img:not(figure.diagram img), .message .attachments img.image, .message .uploads img";
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
    setTimeout(() => restoreLabel(button), FEEDBACK_MS),
  );
}

function restoreLabel(button) {
  if (!restoreTimers.has(button)) return;
  clearTimeout(restoreTimers.get(button));
  restoreTimers.delete(button);
  button.textContent = button.dataset.label;
  const name = button.dataset.ariaLabel;
  if (name) button.setAttribute("aria-label", name);
  delete button.dataset.outcome;
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
  const tools = document.createElement("div");
  tools.className = "lightbox-tools";
  const note = document.createElement("p");
  note.className = "lightbox-note";
  note.setAttribute("role", "status");
  const [download, copy, close] = ["Download", "Copy", "Close"].map((label) => {
    const button = document.createElement("button");
    button.type = "button";
    button.className = `lightbox-${label.toLowerCase()}`;
    button.textContent = label;
    return button;
  });
  tools.append(note, download, copy, close);
  const image = document.createElement("img");
  dialog.append(tools, image);
  // A click on the backdrop lands on the dialog itself (its content is only the two children).
  dialog.addEventListener("click", (event) => {
    if (event.target === dialog || event.target === close) dialog.close();
    else if (event.target === download) downloadImage(image, note);
    else if (event.target === copy) copyImage(copy, image, note);
  });
  dialog.addEventListener("close", () => {
    image.removeAttribute("src");
    note.textContent = "";
    restoreLabel(copy); // the next picture's Copy has not been pressed
    if (opener && opener.isConnected) opener.focus();
    opener = null;
  });
  document.body.append(dialog);
  lightbox = dialog;
  return dialog;
}

// --- Download and Copy, of the picture the lightbox shows -------------------------------------

// The picture's bytes: a data: URL decoded here, anything else fetched from this server.
async function imageBlob(src) {
  if (src.startsWith("data:")) {
    const found = dataUrlBytes(src);
    if (!found) throw new Error("not a picture this page shows");
    return new Blob([found.bytes], { type: found.type });
  }
  const url = new URL(src, document.baseURI);
  if (url.origin !== location.origin) throw new Error("not from this server");
  const response = await fetch(url, { credentials: "same-origin" });
  if (!response.ok) throw new Error(`the server answered ${response.status}`);
  return response.blob();
}

// The clipboard takes PNG only: another type is drawn on a canvas first.
async function pngOf(blob) {
  if (blob.type === "image/png") return blob;
  const bitmap = await createImageBitmap(blob);
  const canvas = document.createElement("canvas");
  canvas.width = bitmap.width;
  canvas.height = bitmap.height;
  canvas.getContext("2d").drawImage(bitmap, 0, 0);
  bitmap.close();
  return new Promise((resolve, reject) => {
    canvas.toBlob((png) => (png ? resolve(png) : reject(new Error("no PNG"))), "image/png");
  });
}

// Its place among its answer's pictures, for the file's name ("image-2.png").
function pictureNumber() {
  const article = opener?.closest("article");
  return article ? [...article.querySelectorAll(ZOOMABLE)].indexOf(opener) + 1 : 0;
}

async function downloadImage(image, note) {
  note.textContent = "";
  try {
    const blob = await imageBlob(image.src);
    const link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = downloadName(blob.type, pictureNumber());
    image.after(link); // in the dialog: the page under a modal one is inert
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 60_000);
  } catch (error) {
    note.textContent = `Could not download the image: ${error.message}.`;
  }
}

function canCopyImages() {
  if (!window.ClipboardItem || !navigator.clipboard?.write) return false;
  return typeof ClipboardItem.supports !== "function" || ClipboardItem.supports("image/png");
}

async function copyImage(button, image, note) {
  note.textContent = "";
  if (!canCopyImages()) {
    showOutcome(button, "Copy failed");
    note.textContent = "This browser cannot copy images: use Download.";
    return;
  }
  try {
    // The PNG is made inside the ClipboardItem, so the write still counts as the click's.
    const png = imageBlob(image.src).then(pngOf);
    await navigator.clipboard.write([new ClipboardItem({ "image/png": png })]);
    showOutcome(button, "Copied");
  } catch (error) {
    showOutcome(button, "Copy failed");
    note.textContent = `Could not copy the image (${error.message}): use Download.`;
  }
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

// A thumbs down opens its comment box below the answer's footer: brought into view, where it may
// lie under the composer at the end of the conversation.
document.addEventListener("htmx:afterSettle", (event) => {
  const comment = event.target.matches?.(".feedback") && event.target.querySelector(".feedback-comment[open]");
  if (comment) comment.scrollIntoView({ block: "nearest" });
});
