// What may be attached to a message, as pure functions (tests/js/attach_rules.test.mjs): the
// caps of chatapp/conversations/uploads.py and its reading of a file's bytes, checked here too so
// a refused file is said at once.

export const MAX_UPLOADS = 5;
export const MAX_UPLOAD_BYTES = 4 * 1024 * 1024;
export const MAX_MESSAGE_UPLOAD_BYTES = 5 * 1024 * 1024;
const IMAGE_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);
// How much of a file `contentKind` is given: enough for any binary to show itself.
export const SNIFF_BYTES = 64 * 1024;
export const NOT_A_KIND = "not a PNG, JPEG, GIF or WebP image, a PDF, or a text file (UTF-8)";

const ascii = (text) => [...text].map((c) => c.charCodeAt(0));
const IMAGE_STARTS = [
  [0x89, ...ascii("PNG\r\n"), 0x1a, 0x0a],
  [0xff, 0xd8, 0xff],
  ascii("GIF87a"),
  ascii("GIF89a"),
];

function startsWith(bytes, start, at = 0) {
  return bytes.length >= at + start.length && start.every((byte, i) => bytes[at + i] === byte);
}

// What a file's bytes say it is, as the server reads them (uploads.content_kind; both pass
// tests/vectors/uploads/content_kinds.json): "image", "pdf", "text", or null for a file it
// refuses. `bytes` are the file's first bytes; `whole`: all of them (else a character cut at
// their end is no fault).
export function contentKind(bytes, whole) {
  const webp = startsWith(bytes, ascii("RIFF")) && startsWith(bytes, ascii("WEBP"), 8);
  if (webp || IMAGE_STARTS.some((start) => startsWith(bytes, start))) return "image";
  if (startsWith(bytes, ascii("%PDF-"))) return "pdf";
  if (bytes.includes(0)) return null;
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(bytes, { stream: !whole });
  } catch {
    return null;
  }
  return "text";
}

// Why a file whose bytes say `kind` is refused, or "".
export function kindRefusal(file, kind) {
  return kind === null ? `${file.name} is ${NOT_A_KIND}` : "";
}

export function sizeWords(size) {
  if (size < 1024) return `${size.toLocaleString("en")} bytes`;
  if (size < 1024 * 1024) return `${(size / 1024).toFixed(1)} KB`;
  return `${(size / 1024 / 1024).toFixed(1)} MB`;
}

// Whether the browser calls it an image (the server reads the type from the bytes).
export function isImage(file) {
  return IMAGE_TYPES.has(file.type);
}

// `files` with `incoming` added, each past a cap left out with why: {files, refused: [words]}.
export function added(files, incoming) {
  const kept = [...files];
  const refused = [];
  for (const file of incoming) {
    const total = kept.reduce((sum, f) => sum + f.size, 0);
    if (kept.length >= MAX_UPLOADS) {
      refused.push(`${file.name}: at most ${MAX_UPLOADS} files can be attached to a message`);
    } else if (file.size > MAX_UPLOAD_BYTES) {
      refused.push(`${file.name} is ${sizeWords(file.size)}: a file may be at most 4 MB`);
    } else if (total + file.size > MAX_MESSAGE_UPLOAD_BYTES) {
      refused.push(`${file.name}: a message's files may be at most 5 MB in all`);
    } else if (!file.size) {
      refused.push(`${file.name} is empty`);
    } else {
      kept.push(file);
    }
  }
  return { files: kept, refused };
}

// What the composer says before sending images to a model that does not take them, or "".
export function imageWarning(files, takesImages, modelLabel) {
  const image = files.find(isImage);
  if (!image || takesImages) return "";
  return `${modelLabel} does not take images (${image.name}): choose a model that does, or remove the image.`;
}
