// Files attached to the message being written: the Attach button, a paste into the box, a drop
// on the composer. The files wait in the composer's file input (`files`, posted as multipart
// only while there are some), shown as chips with a thumbnail or a name and a Remove button;
// a file past a cap, or whose first bytes say it is none of the kinds the server takes, is
// refused in words at once (attach_rules.js), and an image for a model that does not take images
// is said before sending, and not sent. The server checks it all again
// (chatapp/conversations/uploads.py).

import {
  SNIFF_BYTES,
  added,
  contentKind,
  imageWarning,
  isImage,
  kindRefusal,
  sizeWords,
} from "./attach_rules.js";

const chosen = new WeakMap(); // file input -> the File objects attached, in order

function parts() {
  const form = document.getElementById("composer");
  const input = form?.querySelector('input[type="file"][name="files"]');
  if (!input) return null;
  return {
    form,
    input,
    list: form.querySelector(".file-chips"),
    note: form.querySelector(".attach-note"),
  };
}

function filesOf(input) {
  return chosen.get(input) || [];
}

function modelTakesImages() {
  const option = document.getElementById("model")?.selectedOptions[0];
  return { takes: option?.dataset.input === "image", label: option?.textContent.trim() || "This model" };
}

function warning(found) {
  const { takes, label } = modelTakesImages();
  return imageWarning(filesOf(found.input), takes, label);
}

function show(found, refused = []) {
  const { form, input, list, note } = found;
  const files = filesOf(input);
  const transfer = new DataTransfer();
  for (const file of files) transfer.items.add(file);
  input.files = transfer.files;
  if (files.length) form.setAttribute("enctype", "multipart/form-data");
  else form.removeAttribute("enctype");
  list.replaceChildren(...files.map((file, index) => chip(file, index)));
  list.hidden = !files.length;
  const words = [...refused.map((why) => `Not attached: ${why}.`), warning(found)].filter(Boolean);
  note.textContent = words.join(" ");
  note.hidden = !words.length;
}

function chip(file, index) {
  const item = document.createElement("li");
  item.className = isImage(file) ? "attached image" : "attached document";
  if (isImage(file)) {
    const img = document.createElement("img");
    img.alt = "";
    const reader = new FileReader();
    reader.addEventListener("load", () => {
      if (typeof reader.result === "string" && reader.result.startsWith("data:image/")) img.src = reader.result;
    });
    reader.readAsDataURL(file);
    item.append(img);
  }
  const name = document.createElement("span");
  name.className = "attached-name";
  name.textContent = `${file.name} (${sizeWords(file.size)})`;
  const remove = document.createElement("button");
  remove.type = "button";
  remove.className = "remove-attached";
  remove.dataset.index = String(index);
  remove.setAttribute("aria-label", `Remove ${file.name}`);
  remove.textContent = "✕";
  item.append(name, remove);
  return item;
}

// "image", "pdf", "text" or null (refused), from the file's first bytes; undefined when they
// cannot be read here (the server says, on sending).
async function kindOf(file) {
  try {
    const bytes = new Uint8Array(await file.slice(0, SNIFF_BYTES).arrayBuffer());
    return contentKind(bytes, file.size <= SNIFF_BYTES);
  } catch {
    return undefined;
  }
}

async function attach(files) {
  if (!files.length) return;
  const kinds = await Promise.all(files.map(kindOf));
  const found = parts(); // after the reads: the composer may have been swapped meanwhile
  if (!found) return;
  const refused = files.map((file, i) => kindRefusal(file, kinds[i])).filter(Boolean);
  const result = added(filesOf(found.input), files.filter((file, i) => kinds[i] !== null));
  chosen.set(found.input, result.files);
  show(found, [...refused, ...result.refused]);
}

function clear(found) {
  chosen.set(found.input, []);
  show(found);
}

document.addEventListener("click", (event) => {
  const button = event.target.closest?.("button");
  const found = button && parts();
  if (!found || !found.form.contains(button)) return;
  if (button.matches(".attach-button")) {
    found.input.click();
  } else if (button.matches(".remove-attached")) {
    const files = filesOf(found.input).filter((_, i) => i !== Number(button.dataset.index));
    chosen.set(found.input, files);
    show(found);
    found.form.querySelector("textarea")?.focus();
  }
});

document.addEventListener("change", (event) => {
  const found = parts();
  if (!found) return;
  if (event.target === found.input) {
    const picked = [...found.input.files];
    if (picked.length === filesOf(found.input).length && picked.every((f, i) => f === filesOf(found.input)[i])) return;
    attach(picked);
  } else if (event.target.id === "model") {
    show(found);
  }
});

document.addEventListener("paste", (event) => {
  if (event.target.id !== "message") return;
  const files = [...(event.clipboardData?.files || [])];
  if (!files.length) return;
  event.preventDefault(); // the file, not its name as text
  attach(files);
});

function carriesFiles(event) {
  return [...(event.dataTransfer?.types || [])].includes("Files");
}

document.addEventListener("dragover", (event) => {
  const form = event.target.closest?.("#composer");
  if (!form || !carriesFiles(event)) return;
  event.preventDefault();
  form.classList.add("dropping");
});

document.addEventListener("dragleave", (event) => {
  const form = event.target.closest?.("#composer");
  if (form && !form.contains(event.relatedTarget)) form.classList.remove("dropping");
});

document.addEventListener("drop", (event) => {
  const form = event.target.closest?.("#composer");
  if (!form || !carriesFiles(event)) return;
  event.preventDefault();
  form.classList.remove("dropping");
  attach([...event.dataTransfer.files]);
});

// Not sent while an image waits for a model that does not take it: the note says so.
document.addEventListener("htmx:confirm", (event) => {
  const found = parts();
  if (!found || event.target !== found.form) return;
  const why = warning(found);
  if (why) {
    event.preventDefault();
    show(found);
  }
});

document.addEventListener("htmx:afterRequest", (event) => {
  const found = parts();
  if (!found || event.target !== found.form) return;
  const refused = event.detail.xhr?.getResponseHeader("HX-Retarget") === "#composer-error";
  if (event.detail.successful && !refused) clear(found); // sent with the message
});

document.addEventListener("htmx:load", () => {
  const found = parts();
  if (found && !chosen.has(found.input)) clear(found);
});
