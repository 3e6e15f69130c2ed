// What may be attached to a message, as pure functions (tests/js/attach_rules.test.mjs): the
// caps of chatapp/conversations/uploads.py, checked here too so a refused file is said at once.

export const MAX_UPLOADS = 5;
export const MAX_UPLOAD_BYTES = 4 * 1024 * 1024;
export const MAX_MESSAGE_UPLOAD_BYTES = 5 * 1024 * 1024;
const IMAGE_TYPES = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);

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
