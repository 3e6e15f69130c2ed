// static/chatapp/tail_text.js: where the text after a streaming answer's draft shows.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { placeTail, writtenCell } from "../../static/chatapp/tail_text.js";

// A tail whose first part is a draft's: `drafted` is that part's length.
const place = (drafted, rest, host) => placeTail(drafted + rest, drafted.length, host);

test("the rest of an item's line stays in the item once its line has ended", () => {
  const drafted = "- The first finding is that the two measures are closely related, and";
  assert.deepEqual(place(drafted, " worth a second look.\n", "LI"), {
    inline: " worth a second look.",
    below: "",
    runsOn: false,
  });
  assert.deepEqual(place(drafted, " worth a second look.", "LI"), {
    inline: " worth a second look.",
    below: "",
    runsOn: true,
  });
});

test("the next item or row waits for its draft instead of showing raw below", () => {
  const item = "- The first finding, closely related, and";
  for (const next of ["-", "- The", "- The second finding.\n", "12", "3. Third", "  * nested"]) {
    assert.equal(place(item, ` worth a look.\n${next}`, "LI").below, "", next);
  }
  const row = "| alpha | 7 | the alpha row";
  for (const next of ["|", "| bravo | 14", "| bravo | 14 | note |\n"]) {
    assert.equal(place(row, ` of the table |\n${next}`, "TD").below, "", next);
  }
  // A header's cells: the line under it and the first row wait too.
  assert.equal(place("| name | sc", "ore | note |\n|---|--:|---|\n| alph", "TH").below, "");
});

test("what is no row or item shows below, blank lines before it left out", () => {
  const row = "| hotel | 56 | the hotel row";
  assert.deepEqual(place(row, " |\n\n- The first", "TD"), {
    inline: " ",
    below: "- The first",
    runsOn: false,
  });
  assert.equal(place("- last item", ".\n\nThat is all", "LI").below, "That is all");
  assert.equal(place("- last item", ".\n- next\n- and next", "LI").below, "- next\n- and next");
  assert.equal(place("| a | b", " |\n| c |\n| d |\n| e", "TD").below, "| c |\n| d |\n| e");
  assert.equal(place("Some **bold", " text\nmore", "P").below, "more");
});

test("a cell shows its own text, not the cells after it or the row's closing pipe", () => {
  const row = "| golf | 49 | the golf";
  assert.equal(place(row, " row |", "TD").inline, " row ");
  assert.equal(place("| golf | 4", "9 | the golf", "TD").inline, "9 ");
  assert.equal(place("| a \\| b", " c \\| d | e", "TD").inline, " c \\| d ");
  // Text appended next may hold a pipe: a cell's is placed again each time.
  assert.equal(place(row, " row", "TD").runsOn, false);
});

test("a draft that ends with its line leaves the next line below", () => {
  assert.deepEqual(place("Intro with **bold**.\n", "Next line", "P"), {
    inline: "",
    below: "Next line",
    runsOn: false,
  });
  assert.equal(place("- an item\n", "- the next", "LI").below, "");
});

test("without a draft, or a block of it to run on in, all of the tail shows below", () => {
  assert.deepEqual(placeTail("\n\nplain text", 0, "P"), {
    inline: "",
    below: "plain text",
    runsOn: true,
  });
  assert.deepEqual(place("<hr>", "more\n| a |", null), {
    inline: "",
    below: "more\n| a |",
    runsOn: true,
  });
});

// Shared with tests/chatapp/streaming/test_live_blocks.py, which checks the server's half (the draft).
const vectors = JSON.parse(
  readFileSync(new URL("../vectors/drafts/tables_and_formulas.json", import.meta.url), "utf8"),
);

for (const vector of vectors.cases) {
  test(`vector: ${vector.about}`, () => {
    const drafted = vector.drafted.slice(0, vector.covers);
    const tail = vector.drafted + vector.more;
    const rows = [...vector.shows.matchAll(/<tr>([\s\S]*?)<\/tr>/g)];
    const cells = rows.length
      ? [...rows.at(-1)[1].matchAll(/<t[hd][^>]*>([\s\S]*?)<\/t[hd]>/g)].map((m) => m[1])
      : [];
    // As live_render.js places it: in the cell the text is written in, if the row has it.
    const column = cells.length ? writtenCell(drafted, vector.host === "TH") : 0;
    const room = !cells.length || (column >= 0 && column < cells.length);
    const { inline, below } = placeTail(tail, drafted.length, vector.host, room);
    if (cells.length && room) cells[column] += inline;
    assert.deepEqual(
      cells.map((cell) => cell.trim()),
      vector.row,
    );
    assert.equal(below, vector.below);
  });
}

test("the cell a row's text is written in counts the pipes before it", () => {
  assert.equal(writtenCell("| ap"), 0);
  assert.equal(writtenCell("| apple |"), 1);
  assert.equal(writtenCell("| apple | 2 | n"), 2);
  assert.equal(writtenCell("apple | 2"), 1); // a row without its opening pipe
  assert.equal(writtenCell("| a \\| b | c"), 1); // an escaped pipe is text
  assert.equal(writtenCell("| fruit | price |\n|--", true), -1); // the line under a header
  assert.equal(writtenCell("| a | b |\n| --", false), 0); // a row of the body
});
