// static/chatapp/tail_text.js: where the text after a streaming answer's draft shows.

import assert from "node:assert/strict";
import { test } from "node:test";

import { placeTail } from "../../static/chatapp/tail_text.js";

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
