// Image generations in the page: the pictures of a running one, and the picker's image models.
//
// While an image generation streams, each delta's `previews`
// (chatapp/messaging/socket_messages.py) carries the
// newest picture of some of its images as `[index, dataUrl, partial]`: it takes the place of the
// one before it for that index, in the same figure, so previews give way to the finals without
// the grid moving. The server has checked each picture's bytes; the URL is checked again here
// (raster types only) because it is model output. The final render then shows the stored images,
// served from our origin.

const SAFE_PICTURE = /^data:image\/(?:png|jpeg|gif|webp);base64,[A-Za-z0-9+/]+={0,2}$/;
const MAX_IMAGES = 10; // chatapp/rendering/image_checks.py MAX_PREVIEW_IMAGES

function figureFor(box, index) {
  const figures = [...box.querySelectorAll(":scope > figure.generated-image[data-index]")];
  const found = figures.find((figure) => Number(figure.dataset.index) === index);
  if (found) return found;
  const figure = document.createElement("figure");
  figure.className = "generated-image";
  figure.dataset.index = String(index);
  const img = document.createElement("img");
  img.className = "image";
  const caption = document.createElement("figcaption");
  figure.append(img, caption);
  // In index order, whichever image's first picture came first.
  const after = figures.find((other) => Number(other.dataset.index) > index);
  box.insertBefore(figure, after || null);
  return figure;
}

// The pictures of `previews` in `article`'s attachments, each in place of its index's last.
export function showImagePreviews(article, previews) {
  const box = article.querySelector(":scope > .attachments");
  if (!box || !Array.isArray(previews)) return;
  for (const entry of previews) {
    if (!Array.isArray(entry)) continue;
    const [index, url, partial] = entry;
    if (!Number.isInteger(index) || index < 0 || index >= MAX_IMAGES) continue;
    if (typeof url !== "string" || !SAFE_PICTURE.test(url)) continue;
    const figure = figureFor(box, index);
    const img = figure.querySelector("img");
    img.src = url;
    img.alt = `Image ${index + 1}${partial ? ", preview" : ""}`;
    figure.classList.toggle("preview", Boolean(partial));
    figure.querySelector("figcaption").textContent = partial ? "Preview" : "";
  }
}

// The composer for the model picked: an image model shows the Images count and asks for a
// description; any other model hides the count (it is still posted, and ignored).
function syncImagePicker() {
  const picker = document.getElementById("model");
  const box = document.getElementById("message");
  if (!picker || !box) return;
  const option = picker.selectedOptions[0];
  const image = Boolean(option && option.dataset.output === "image");
  if (box.dataset.chatPlaceholder === undefined) box.dataset.chatPlaceholder = box.placeholder;
  box.placeholder = image ? "Describe an image…" : box.dataset.chatPlaceholder;
  const count = document.querySelector("#composer .image-count");
  if (count) count.hidden = !image;
}

document.addEventListener("change", (event) => {
  if (event.target && event.target.id === "model") syncImagePicker();
});
document.addEventListener("DOMContentLoaded", syncImagePicker);
document.addEventListener("htmx:load", syncImagePicker);
