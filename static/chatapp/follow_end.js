// Following the end of the conversation while answers stream, and the "↓" button that brings it
// back: the page follows until the user scrolls up, and again once they scroll back down or
// press the button. Every change an answer makes asks `followingBottom` first and, when it was,
// `scrollToBottom` after (live_render.js, chat.js, final_patch.js, composer.js).

// Whether the page follows the end of the conversation: it does until the user scrolls up, and
// again once they scroll back down. It is kept from the scroll events rather than measured before
// each change, so that a change which grows the page by more than the margin at once (a snapshot,
// a settled table, the final render, the next round) is followed too.
const FOLLOW_MARGIN_PX = 80;
let following = true;
document.addEventListener(
  "scroll",
  (event) => {
    const box = event.target;
    if (box instanceof Element && box.id === "messages") {
      following = box.scrollHeight - box.scrollTop - box.clientHeight < FOLLOW_MARGIN_PX;
      showJump();
    }
  },
  { capture: true, passive: true },
);

// Scrolled up while an answer streams, the "↓" button (templates/chatapp/_chat_main.html) shows:
// it brings the end back into view and follows it again, as scrolling down does.
const STREAMING = '#messages article.assistant[data-status="streaming"]';
// `streaming` when the caller knows (chat.js: an answer that has ended may not be patched yet).
export function showJump(streaming = document.querySelector(STREAMING) !== null) {
  const button = document.getElementById("jump-latest");
  if (!button) return;
  const hide = following || !streaming;
  if (button.hidden !== hide) button.hidden = hide;
}
document.addEventListener("click", (event) => {
  if (event.target instanceof Element && event.target.closest("#jump-latest")) scrollToBottom();
});

// The box itself can shrink after the end was scrolled to (the composer below it grows: the
// picker's filter appears, a note or attached files show): a page that follows the end keeps it
// in view then too.
if (typeof ResizeObserver === "function") {
  const resized = new ResizeObserver(() => {
    const box = document.getElementById("messages");
    if (following && box) box.scrollTop = box.scrollHeight;
  });
  let observed = null;
  const observe = () => {
    const box = document.getElementById("messages");
    if (box && box !== observed) {
      if (observed) resized.unobserve(observed);
      resized.observe(box);
      observed = box;
    }
  };
  observe();
  document.addEventListener("htmx:afterSettle", observe); // a conversation swapped in
}

export function followingBottom() {
  showJump(); // asked before each change an answer makes: the button comes and goes with it
  return following && document.getElementById("messages") !== null;
}

export function scrollToBottom() {
  const box = document.getElementById("messages");
  following = true;
  if (box) box.scrollTop = box.scrollHeight;
  showJump();
}
