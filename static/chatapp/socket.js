// The tab's one websocket, opened with the page and kept across htmx swaps: the page tells it
// which conversation it shows (`watch`), so a new conversation streams without a page load or a
// new socket. A closed socket reconnects, 250 ms after, doubling to 5 s; one closed because the
// session ended sends the page to sign in.

const SESSION_ENDED = 4401; // the server's close code for a socket without a valid session
const WATCH_CHECK_MS = 1000;

let socket = null;
let watched = null; // the conversation this socket was last told to watch
let retryDelay = 250;
let reconnectTimer = null;
let handlers = null;

export function send(msg) {
  if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(msg));
}

function shownConversation() {
  const main = document.querySelector("main.chat[data-conversation]");
  return main ? Number(main.dataset.conversation) : null;
}

function watch() {
  const id = shownConversation();
  if (!socket || socket.readyState !== WebSocket.OPEN || id === null || id === watched) return;
  watched = id;
  const asked = Date.now();
  send({ t: "watch", c: id });
  // The server answers with snapshots of running answers; a while later `onWatched` asks again
  // for any it did not cover.
  handlers.onWatchSent(asked);
  setTimeout(() => handlers.onWatched(asked), WATCH_CHECK_MS);
}

// Open the socket if the page has none (else watch what it shows now). `handlers.onMessage(parsed)`
// gets each message as JSON; `handlers.onWatchSent(asked)` is called as each watch is sent at
// `asked`, and `handlers.onWatched(asked)` a while after it.
export function connect(pageHandlers) {
  handlers = pageHandlers;
  const holder = document.querySelector("[data-socket-path]");
  if (socket || !holder) {
    watch();
    return;
  }
  clearTimeout(reconnectTimer);
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(`${scheme}//${location.host}${holder.dataset.socketPath}`);
  socket = ws;
  ws.onopen = () => {
    retryDelay = 250;
    document.body.dataset.socket = "open";
    watched = null;
    watch();
  };
  ws.onmessage = (event) => {
    let msg;
    try {
      msg = JSON.parse(event.data);
    } catch {
      return;
    }
    handlers.onMessage(msg);
  };
  ws.onclose = (event) => {
    if (socket !== ws) return;
    socket = null;
    watched = null;
    document.body.dataset.socket = "closed";
    if (event.code === SESSION_ENDED && holder.dataset.loginPath) {
      // Signed out (here or in another tab), password changed or deactivated: reconnecting would
      // be refused for ever; sign in again and come back here.
      const back = encodeURIComponent(location.pathname + location.search);
      location.assign(`${holder.dataset.loginPath}?next=${back}`);
      return;
    }
    reconnectTimer = setTimeout(() => connect(handlers), retryDelay);
    retryDelay = Math.min(retryDelay * 2, 5000);
  };
}
