// An answer's picture as a file, for the lightbox's Download and Copy (answer_tools.js): the
// bytes of a `data:` URL (the CSP's connect-src refuses to fetch one) and the name to save it
// under. Pure, so tests/js checks it.

const EXTENSIONS = { "image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp" };
const DATA_URL = /^data:(image\/(?:png|jpeg|gif|webp));base64,([A-Za-z0-9+/]+={0,2})$/;

// `{type, bytes}` of a base64 raster `data:` URL, else null (not one the page shows).
export function dataUrlBytes(url) {
  const match = typeof url === "string" ? DATA_URL.exec(url) : null;
  if (!match) return null;
  let text;
  try {
    text = atob(match[2]);
  } catch {
    return null;
  }
  const bytes = Uint8Array.from(text, (char) => char.charCodeAt(0));
  return { type: match[1], bytes };
}

// "image-2.png": the answer's second picture, named by its type (no extension for another).
export function downloadName(type, number) {
  const base = Number.isInteger(number) && number > 0 ? `image-${number}` : "image";
  const extension = EXTENSIONS[String(type).split(";")[0].trim().toLowerCase()];
  return extension ? `${base}.${extension}` : base;
}
