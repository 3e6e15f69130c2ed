// "+ Compare" beside the model picker: a copy of the picker per model the message goes to as
// well (`compare`, at most two more: three answers side by side), each with × to take it away.
// They are for the message being written: once it is sent, the composer offers one model again.

const MAX_EXTRA = 2;

function extras(form) {
  return [...form.querySelectorAll("#compare-models > .compare-model")];
}

function sync(form) {
  const add = form.querySelector("button.add-compare");
  const list = extras(form);
  list.forEach((item, index) => {
    item.querySelector("select").setAttribute("aria-label", `Model ${index + 2}`);
    item.querySelector("button").setAttribute("aria-label", `Stop comparing model ${index + 2}`);
  });
  if (add) add.hidden = list.length >= MAX_EXTRA;
}

function addModel(form) {
  const picker = form.querySelector("#model");
  const holder = form.querySelector("#compare-models");
  if (!picker || !holder || extras(form).length >= MAX_EXTRA) return;
  const item = document.createElement("span");
  item.className = "compare-model";
  const select = picker.cloneNode(true);
  select.removeAttribute("id");
  select.name = "compare";
  // Another model than those chosen already, when there is one: a comparison of one is no news.
  const taken = new Set([picker.value, ...extras(form).map((el) => el.querySelector("select").value)]);
  const other = [...select.options].find((option) => !option.disabled && option.value && !taken.has(option.value));
  select.value = other ? other.value : picker.value;
  const remove = document.createElement("button");
  remove.type = "button";
  remove.className = "remove-compare";
  remove.textContent = "×";
  item.append(select, remove);
  holder.append(item);
  sync(form);
  select.focus();
}

function clear(form) {
  for (const item of extras(form)) item.remove();
  sync(form);
}

document.addEventListener("click", (event) => {
  const button = event.target.closest && event.target.closest("#composer button");
  if (!button) return;
  const form = button.closest("form");
  if (button.matches(".add-compare")) addModel(form);
  else if (button.matches(".remove-compare")) {
    button.closest(".compare-model").remove();
    sync(form);
    form.querySelector("button.add-compare")?.focus();
  }
});

// Sent (and not refused in words, which retargets to the error line): the next message goes to
// one model unless more are added again.
document.addEventListener("htmx:afterRequest", (event) => {
  const form = event.target;
  if (form.id !== "composer" || !event.detail.successful) return;
  if (event.detail.xhr.getResponseHeader("HX-Retarget") === "#composer-error") return;
  if (form.isConnected) clear(form);
});

// "Continue with this": the conversation goes on with the chosen answer's model, so the picker
// shows it (the server names it: views/comparison.py). A model no longer listed is left alone.
document.addEventListener("chat:model-chosen", (event) => {
  const picker = document.getElementById("model");
  const value = event.detail?.value;
  if (!picker || typeof value !== "string" || picker.value === value) return;
  if (![...picker.options].some((option) => option.value === value)) return;
  picker.value = value;
  picker.dispatchEvent(new Event("change", { bubbles: true }));
});
