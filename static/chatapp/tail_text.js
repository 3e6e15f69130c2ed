// Where a streaming answer's unsettled text shows (live_render.js draws it): pure, so that
// `node --test` checks it (tests/js/tail_text.test.mjs).
//
// A draft (the start of the tail, rendered by the server) ends where the text had reached when
// it was rendered, often inside a line: the rest of that line belongs to the draft's last block
// (a list item's sentence, a table's last cell) and runs on in it, so that it does not move when
// the next draft takes it in. Only what follows a line break may be a block of its own, shown
// after the answer's blocks. Were the whole rest moved there once a line break arrived, the end
// of a sentence would leave its item for a raw line below, and the answer would grow by that
// line and shrink again with each draft: it jumped row by row while a table streamed.
//
// The line after a table's row or a list's item is most often the next row or item, which the
// next draft shows in place a moment later. Shown as text below the block meanwhile, it is raw
// markdown (`| cell |`, `- item`) a line high with a paragraph's margins, which the row or item
// then replaces with a shorter one: the answer would shrink. So while the text after the line
// break is one such line (or two rows: a table's header line under its first row), it waits
// for that draft (or its settle, once the line has ended); so do the cells after a table's last
// drafted cell, and the pipe that ends its row.

const LINE_BREAK = /\r\n?|\n/;
const ENDS_LINE = /[\r\n]$/;
const BLANK_LINES = /^([ \t]*(\r\n?|\n))+/; // before a block: they show as space
const ROW = /^ {0,3}\|/;
const ITEM = /^[ \t]*([-+*]|\d{1,9}[.)]|\d{1,9}$)([ \t]|$)/;
// What waits, by the tag of the draft's last block: at most this many lines, each like this.
const NEXT_LINES = { TD: [2, ROW], TH: [2, ROW], LI: [1, ITEM] };
const CELL_END = /(^|[^\\])\|/; // an unescaped pipe

// `tail` split by where it shows, when its first `drafted` UTF-16 units are a draft's and
// `host` is the tag name of the draft's last block (null when the page has none):
// - `inline`: the rest of the draft's last line, shown in that block;
// - `below`: the text from the next line on, shown after the answer's blocks (blank lines before
//   it left out; nothing while it is a row or item that the next draft will show);
// - `runsOn`: whether text that arrives next may be appended to what shows last, without
//   placing the tail again (not once a line break or anything held back follows `inline`).
// - `room`: false when the draft's last block is a row whose cells end before the one the text
//   is written in (a header row a cell short of it): that text waits for the next draft.
export function placeTail(tail, drafted, host, room = true) {
  const rest = tail.slice(drafted);
  if (!host || drafted <= 0) {
    return { inline: "", below: rest.replace(BLANK_LINES, ""), runsOn: true };
  }
  let inline = "";
  let after = rest;
  let runsOn = false;
  if (!ENDS_LINE.test(tail.slice(0, drafted))) {
    const found = LINE_BREAK.exec(rest);
    inline = found ? rest.slice(0, found.index) : rest;
    after = found ? rest.slice(found.index + found[0].length) : "";
    const cell = host === "TD" || host === "TH";
    runsOn = !found && !cell; // a cell's text is cut where the next cell begins, at each change
    const cut = cell ? CELL_END.exec(inline) : null;
    if (cut) inline = inline.slice(0, cut.index + cut[1].length);
    if (!room) inline = "";
  }
  return { inline, below: held(host, after) ? "" : after.replace(BLANK_LINES, ""), runsOn };
}

function held(host, after) {
  if (!(host in NEXT_LINES) || !after) return false;
  const [most, like] = NEXT_LINES[host];
  const lines = after.split(LINE_BREAK);
  if (lines.at(-1) === "") lines.pop(); // the last line ended
  return lines.length <= most && lines.every((line) => like.test(line));
}

// The column (from 0) of the cell a table row's text is being written in, when `text` ends in
// that row: the pipes before it, less the one that opens the row. Text after a draft that ends
// inside a row belongs to this cell, not to the row's last: a row of two cells drafted at
// "| ap" is "ap" and an empty cell, and "ple" goes on in the first ("apple"), not under the
// second column's header. In a header row (`header`), a line that is the line under it as far
// as written (pipes, dashes, colons) is no cell's: -1.
const DELIMITER_SO_FAR = /^ {0,3}\|?[ \t:|-]*$/;
export function writtenCell(text, header = false) {
  const line = text.slice(Math.max(text.lastIndexOf("\n"), text.lastIndexOf("\r")) + 1);
  if (header && /[\r\n]/.test(text) && DELIMITER_SO_FAR.test(line)) return -1;
  let pipes = 0;
  for (let i = 0; i < line.length; i++) {
    if (line[i] === "|" && line[i - 1] !== "\\") pipes++;
  }
  return ROW.test(line) ? Math.max(pipes - 1, 0) : pipes;
}
