// The theme: light, dark or the system's ("auto"), kept in this browser's localStorage under
// "theme", the key and values Django's admin uses, so the app and the admin agree.
//
// A classic script in <head>, before the stylesheets: it sets <html data-theme> before the first
// paint, so a dark page never flashes light (the CSP allows no inline script to do it). The
// sidebar's Theme picker (`select[data-theme-picker]`) is handled here too, by listeners on the
// document; nothing goes on `window`.
{
  const THEMES = ["auto", "light", "dark"];
  const root = document.documentElement;

  const stored = () => {
    try {
      const value = localStorage.getItem("theme");
      return THEMES.includes(value) ? value : "auto";
    } catch {
      return "auto"; // storage refused (a privacy setting): the system's theme
    }
  };

  const showPickers = () => {
    for (const picker of document.querySelectorAll("select[data-theme-picker]")) {
      picker.value = root.dataset.theme;
    }
  };

  root.dataset.theme = stored();

  document.addEventListener("change", (event) => {
    const picker = event.target;
    if (!(picker instanceof HTMLSelectElement) || !picker.matches("[data-theme-picker]")) return;
    const theme = THEMES.includes(picker.value) ? picker.value : "auto";
    root.dataset.theme = theme;
    try {
      localStorage.setItem("theme", theme);
    } catch {
      // Not kept: this page shows it until it is left.
    }
    showPickers();
  });
  // Another tab chose one.
  window.addEventListener("storage", (event) => {
    if (event.key !== "theme" && event.key !== null) return;
    root.dataset.theme = stored();
    showPickers();
  });
  // The picker as drawn by the server says "System"; a boosted page or Back draws it again.
  document.addEventListener("DOMContentLoaded", showPickers);
  document.addEventListener("htmx:load", showPickers);
  document.addEventListener("htmx:historyRestore", showPickers);
}
