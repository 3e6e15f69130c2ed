// One streaming answer's state as the page knows it, and what each websocket message does to it:
// pure functions, no DOM and no clock (the time comes in as `now`, in milliseconds), so that
// `node --test` runs them from the JSON vectors in tests/vectors/stream/, which the Python twin
// (chatapp/ws/page_model.py) passes too. Change both together.
//
// The state keeps the `seq` of the last delta applied. A delta at or below it is a duplicate and
// dropped; one beyond the next is a gap: it is held back and a snapshot asked for (at most once a
// second), which replaces the text so far; the held deltas that follow it are then applied.
// `content` is the answer's text from UTF-16 offset `offset` (0, or where the page's render left
// its settled blocks, whose text the page holds only as HTML); its first `settledEnd - offset`
// units are shown as the server's settled HTML (chatapp/streaming/live_blocks.py), the rest as
// text.
//
// `receive` returns the new state and the effects, in order, for the page to carry out:
// - `{do: "append", delta, settle}`: a delta applied; `settle`, when its settled HTML goes in,
//   is `{start, end, join, joined, rest}`: `joined` goes into the open block's element (or
//   replaces it, `join` "="), `rest` follows it. A page whose open block is not `join`'s calls
//   `refuseSettle`, and leaves out the settled HTML of the effects after it;
//   `draft` is the delta's draft to show in place of the start of the tail (`{start, end, join,
//   joined, rest}`, placed as a settle is; `end` is where the text shown as text begins), or
//   null: the draft shown is gone (a settle took its place, or the new one does not fit); left
//   out, the draft shown stays;
// - `{do: "replace", snapshot, tail, draft}`: a snapshot applied, the text so far replaced
//   (`tail`: its content after its settled HTML; `draft` as above, or null);
// - `{do: "send", message}`: a message for the socket (a snapshot request);
// - `{do: "finish", done}`: the answer ended (the page fetches its final render);
// - `{do: "refresh"}`: the record changed, the page fetches its render again.

export const SNAPSHOT_ASK_INTERVAL_MS = 1000;

export function start({ g, seq = 0, settledEnd = 0, tail = "", reasoning = "" }) {
  return {
    g,
    seq,
    offset: settledEnd,
    content: tail,
    settledEnd,
    reasoning,
    draft: null, // `{start, end}` of the draft shown, if any
    held: new Map(), // seq -> delta beyond a gap
    askedAt: null, // when a snapshot was last asked for, until one arrives
    snapAt: null, // when the last snapshot arrived
    done: false,
  };
}

// The content shown as text, after the settled blocks.
export function tailOf(state) {
  return state.content.slice(state.settledEnd - state.offset);
}

// A delta is a bare array, `[g, seq, content, reasoning?, extras?]`
// (chatapp/messaging/socket_messages.py).
export function fromWire(parsed) {
  if (!Array.isArray(parsed)) return parsed;
  const msg = { t: "delta", g: parsed[0], seq: parsed[1], content: parsed[2] || "" };
  if (parsed[3]) msg.reasoning = parsed[3];
  if (parsed[4]) Object.assign(msg, parsed[4]);
  return msg;
}

// A frame's messages: one, or a tick's deltas of several answers, `[[g, seq, ...], ...]`
// (chatapp/streaming/frames.py), in order.
export function messagesFromWire(parsed) {
  if (Array.isArray(parsed) && Array.isArray(parsed[0])) return parsed.map(fromWire);
  return [fromWire(parsed)];
}

export function receive(state, msg, now) {
  const effects = [];
  if (state.done) return { state, effects };
  const next = { ...state, held: new Map(state.held) };
  switch (msg.t) {
    case "delta":
      onDelta(next, msg, now, effects);
      break;
    case "snapshot":
      onSnapshot(next, msg, now, effects);
      break;
    case "done":
      next.done = true;
      effects.push({ do: "finish", done: msg });
      break;
    case "updated":
      effects.push({ do: "refresh" });
      break;
    default:
      return { state, effects };
  }
  return { state: next, effects };
}

// The page could not put `settle` (an effect's) into its open block: it shows that text as text,
// as if the block had not settled, and asks for a snapshot to set its blocks right.
export function refuseSettle(state, settle, now) {
  const effects = [];
  const next = { ...state, settledEnd: settle.start, draft: null };
  askSnapshot(next, now, effects);
  return { state: next, effects };
}

// A watch was sent at `now`: the server answers it with a snapshot of each running answer, so it
// stands for this answer's snapshot ask (a gap seen before that snapshot arrives asks no more).
export function watchSent(state, now) {
  if (state.done) return { state, effects: [] };
  return { state: { ...state, askedAt: now }, effects: [] };
}

// A while after a watch: an answer that no snapshot has covered since asks for one (e.g. one
// that finished between the page's render and the watch).
export function afterWatch(state, asked, now) {
  const effects = [];
  if (state.done || (state.snapAt !== null && state.snapAt >= asked)) return { state, effects };
  const next = { ...state };
  askSnapshot(next, now, effects);
  return { state: next, effects };
}

function onDelta(s, msg, now, effects) {
  if (msg.seq <= s.seq) return; // already have it
  if (msg.seq > s.seq + 1) {
    s.held.set(msg.seq, msg);
    askSnapshot(s, now, effects);
    return;
  }
  apply(s, msg, now, effects);
  drainHeld(s, now, effects);
}

function onSnapshot(s, msg, now, effects) {
  s.askedAt = null;
  s.snapAt = now;
  if (msg.seq < s.seq) return;
  const [, end] = msg.settled || [0, 0, ""];
  s.offset = 0;
  s.content = msg.content || "";
  s.settledEnd = end;
  s.reasoning = msg.reasoning || "";
  s.seq = msg.seq;
  const draft = msg.draft ? draftOf(s, msg.draft) : null;
  s.draft = draft && { start: draft.start, end: draft.end };
  effects.push({ do: "replace", snapshot: msg, tail: tailOf(s), draft });
  drainHeld(s, now, effects);
}

function apply(s, msg, now, effects) {
  if (msg.content) s.content += msg.content;
  const settle = msg.settled ? settleOf(s, msg.settled, now, effects) : null;
  if (msg.reasoning) s.reasoning += msg.reasoning;
  s.seq = msg.seq;
  const effect = { do: "append", delta: msg, settle };
  if ("draft" in msg || msg.settled) {
    // A settle takes the draft's place; a draft that does not start where the settled part ends
    // (this page's blocks were split elsewhere) is not shown.
    const draft = msg.draft ? draftOf(s, msg.draft) : null;
    s.draft = draft && { start: draft.start, end: draft.end };
    effect.draft = draft;
  }
  effects.push(effect);
}

// `[start, end, html, join?, split?]`, a draft of the tail from where the settled part ends.
function draftOf(s, wire) {
  const [start, end, html, join, split] = wire;
  if (start !== s.settledEnd || end < start || end - s.offset > s.content.length) return null;
  if (!join) return { start, end, join: null, joined: "", rest: html };
  return { start, end, join, joined: html.slice(0, split), rest: html.slice(split) };
}

// `[start, end, html]`, or `[start, end, html, join, split]`: the first `split` units of `html`
// continue the block still open (a list's next items, a table's rows...).
function settleOf(s, settled, now, effects) {
  const [start, end, html, join, split] = settled;
  if (start !== s.settledEnd || end - start > tailOf(s).length) {
    askSnapshot(s, now, effects); // this page's blocks were split elsewhere (it rendered first)
    return null;
  }
  s.settledEnd = end;
  if (!join) return { start, end, join: null, joined: "", rest: html };
  return { start, end, join, joined: html.slice(0, split), rest: html.slice(split) };
}

function drainHeld(s, now, effects) {
  while (s.held.has(s.seq + 1)) {
    const next = s.held.get(s.seq + 1);
    s.held.delete(s.seq + 1);
    apply(s, next, now, effects);
  }
  for (const seq of s.held.keys()) if (seq <= s.seq) s.held.delete(seq);
  if (s.held.size) askSnapshot(s, now, effects);
}

function askSnapshot(s, now, effects) {
  if (s.askedAt !== null && now - s.askedAt < SNAPSHOT_ASK_INTERVAL_MS) return;
  s.askedAt = now;
  effects.push({ do: "send", message: { t: "snapshot", g: s.g } });
}
