"""An answer looks finished while it streams: its settled blocks arrive rendered, the final render
changes nothing, thinking and quiet streams are shown for what they are."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.waiting import poll

from .conftest import finished, screenshots, send

pytestmark = [pytest.mark.browser, pytest.mark.paced]

# The echo model streams this back 4 characters a chunk; the paragraph after the blocks keeps
# the answer streaming for seconds once they have settled.
TAIL = " ".join(f"t{n:03d}" for n in range(1, 101))
LONG_TAIL = " ".join(f"t{n:03d}" for n in range(1, 201))
MARKDOWN = """## Shopping plan

- apples
- **pears**

| fruit | kg |
|:------|---:|
| apple | 2 |

```python
def total(kg):
    return kg * 2
```

"""

RECORD_LIVE_DOM = """el => {
    // The answer's content as the page shows it after every change while it streams.
    const box = el.querySelector(".content");
    window.liveViews = [];
    new MutationObserver(() => {
        if (el.dataset.status === "streaming") window.liveViews.push(box.innerHTML);
    }).observe(box, { childList: true, characterData: true, subtree: true });
}"""


def streaming_answer(page: Any, text: str, model: str = "emulator/echo") -> Any:
    send(page, text, model)
    expect(page).to_have_url(re.compile(r"/c/\d+/$"))
    answer = page.locator("article.assistant").last
    expect(answer).to_have_attribute("data-status", "streaming")
    return answer


def test_markdown_renders_while_it_streams_and_ends_as_last_shown(alice: Any) -> None:
    answer = streaming_answer(alice, MARKDOWN + LONG_TAIL)  # a wide window to see it stream
    answer.evaluate(RECORD_LIVE_DOM)
    # Every block rendered at one moment while it streams, checked in the page at once: checked
    # one by one, a loaded machine saw the answer end between the checks.
    alice.wait_for_function(
        """el => {
            const box = el.querySelector(".content");
            const texts = selector => JSON.stringify(
                [...box.querySelectorAll(selector)].map(e => e.textContent.trim()));
            return el.dataset.status === "streaming"
                && box.querySelector("pre code span.k") !== null
                && texts("h2") === '["Shopping plan"]'
                && texts("ul > li") === '["apples","pears"]'
                && texts("ul strong") === '["pears"]'
                && texts("table td.align-right") === '["2"]'
                && texts(".code-lang") === '["python"]'
                && !box.innerText.includes("##");
        }""",
        arg=answer.element_handle(),
    )
    box = answer.locator(".content")

    expect(answer).to_have_attribute("data-status", "completed", timeout=30_000)
    expect(answer.locator(".content.rendered")).to_be_attached()
    final = box.inner_html()
    live = alice.evaluate("window.liveViews")
    assert len(live) > 10, "the answer was seen changing while it streamed"
    assert live[-1] == final  # the final render changed nothing
    assert "<h2>Shopping plan</h2>" in final
    assert "live-tail" not in final


def test_a_code_block_streams_as_code_before_its_fence_closes(alice: Any) -> None:
    body = "\n".join(f"    step_{n} = {n}" for n in range(20))
    answer = streaming_answer(alice, f"Code:\n\n```python\ndef run():\n{body}\n```\n\nDone.")
    alice.wait_for_function(
        """el => el.dataset.status === "streaming"
            && el.querySelector(".live-tail pre code")?.textContent.includes("step_3")""",
        arg=answer.element_handle(),
    )
    tail = answer.locator(".live-tail")
    expect(tail.locator(".code-lang")).to_have_text("python")
    assert "```" not in tail.inner_text()
    expect(answer).to_have_attribute("data-status", "completed", timeout=30_000)
    expect(answer.locator(".content pre code span").first).to_be_attached()


def test_think_tags_split_across_chunks_go_to_the_thinking_pane(alice: Any) -> None:
    # Not `streaming_answer`: this answer is short enough to end before its streaming state can
    # be seen on a quick machine (seen in a full run); where the tags go is what is checked.
    send(
        alice,
        "<think>Weighing apples against pears, slowly.</think>Pears win, 3 to 2.",
        "emulator/echo",
    )
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    answer = alice.locator("article.assistant").last
    pane = answer.locator("details.reasoning-pane")
    expect(pane.locator(".reasoning")).to_contain_text("Weighing apples")
    expect(answer).to_have_attribute("data-status", "completed", timeout=30_000)
    expect(answer.locator(".content")).to_have_text("Pears win, 3 to 2.")
    expect(pane.locator("summary")).to_have_text(re.compile(r"^Thought for \d+ s$"))
    expect(pane.locator(".reasoning")).to_have_text("Weighing apples against pears, slowly.")


def test_a_quiet_stream_says_it_is_waiting_for_the_gateway(alice: Any) -> None:
    # The browser tests' server notices a quiet stream after 1 s and gives up after 2 s.
    answer = streaming_answer(alice, "Tell me a story", "emulator/stall")
    meta = answer.locator(".message-footer .meta")
    expect(meta).to_have_text(re.compile(r"waiting for the gateway… \d+ s$"))
    expect(answer.get_by_role("button", name="Stop")).to_be_visible()
    expect(answer).to_have_attribute("data-status", re.compile("failed|incomplete"))
    expect(answer.locator(".error")).to_contain_text("went quiet")


def test_markup_in_live_blocks_stays_text(alice: Any) -> None:
    dialogs: list[str] = []
    alice.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    payload = (
        "# <img src=x onerror=alert(1)>\n\n"
        "<script>alert(2)</script>\n\n"
        "- [x](javascript:alert(3))\n\n"
        "```<img src=x onerror=alert(4)>\n<script>alert(5)</script>\n```\n\n"
        f"{TAIL}"
    )
    answer = streaming_answer(alice, payload)
    alice.wait_for_function(
        """el => el.dataset.status === "streaming" && el.querySelector(".content pre")""",
        arg=answer.element_handle(),
    )
    box = answer.locator(".content")
    expect(box.locator("h1")).to_have_text("<img src=x onerror=alert(1)>")
    expect(box).to_contain_text("<script>alert(2)</script>")
    expect(box.locator("li")).to_have_text("[x](javascript:alert(3))")
    for selector in ("img", "script", "a", "svg", "[onerror]"):
        assert box.locator(selector).count() == 0, selector
    expect(answer).to_have_attribute("data-status", "completed", timeout=30_000)
    for selector in ("img", "script", "a", "svg", "[onerror]"):
        assert box.locator(selector).count() == 0, selector
    alice.evaluate(
        "() => new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve)))"
    )
    assert dialogs == []


def test_a_reload_mid_stream_shows_the_same_blocks_and_carries_on(alice: Any) -> None:
    answer = streaming_answer(alice, MARKDOWN + LONG_TAIL)
    alice.wait_for_function(
        """el => el.dataset.status === "streaming" && el.querySelector(".content table")""",
        arg=answer.element_handle(),
    )
    alice.reload()
    answer = alice.locator("article.assistant").last
    expect(answer).to_have_attribute("data-status", "streaming")
    box = answer.locator(".content")
    # The page's own render of the stored part, then the worker's snapshot: blocks either way.
    expect(box.locator("h2")).to_have_text("Shopping plan")
    expect(box.locator("table td.align-right")).to_have_text("2")
    answer.evaluate(RECORD_LIVE_DOM)
    expect(answer).to_have_attribute("data-status", "completed", timeout=30_000)
    expect(answer.locator(".content.rendered")).to_be_attached()
    assert alice.evaluate("window.liveViews")[-1] == box.inner_html()
    expect(box.locator("h2")).to_have_count(1)
    expect(box).to_contain_text("t200")


AT_END = """() => {
    const box = document.getElementById("messages");
    return box.scrollHeight > box.clientHeight
        && box.scrollHeight - box.scrollTop - box.clientHeight < 80;
}"""


def test_the_page_follows_the_end_unless_the_user_scrolled_up(alice: Any) -> None:
    alice.set_viewport_size({"width": 390, "height": 844})
    answer = streaming_answer(alice, MARKDOWN + TAIL)
    alice.wait_for_function(
        """el => el.dataset.status === "streaming" && el.querySelector(".content table")""",
        arg=answer.element_handle(),
    )
    alice.wait_for_function(AT_END)  # blocks that grow the answer keep its end in view
    expect(answer).to_have_attribute("data-status", "completed", timeout=30_000)
    expect(answer.locator(".content.rendered")).to_be_attached()
    alice.wait_for_function(AT_END)  # and so does the final render

    answer = streaming_answer(alice, MARKDOWN + TAIL)
    alice.wait_for_function(
        """el => el.dataset.status === "streaming" && el.querySelector(".content table")""",
        arg=answer.element_handle(),
    )
    # A block may land between the user's scroll and its event, and follow the end once more
    # (the page learns of a scroll only from its event): scroll up until it stays up.
    poll(
        lambda: alice.evaluate(SCROLL_UP_AND_SETTLE) == 0,
        what="the page scrolled to the top and left there",
    )
    length = len(answer.locator(".content").inner_text())
    alice.wait_for_function(  # more arrives, and the page stays where the user put it
        """([el, n]) => el.querySelector(".content").innerText.length > n + 200""",
        arg=[answer.element_handle(), length],
    )
    assert alice.evaluate("document.getElementById('messages').scrollTop") == 0
    expect(answer).to_have_attribute("data-status", "completed", timeout=30_000)
    expect(answer.locator(".content.rendered")).to_be_attached()
    assert alice.evaluate("document.getElementById('messages').scrollTop") == 0


# A snapshot (a page joining an answer, or catching up after a gap) that grows the page by far
# more than the margin at once; through the page's own module, the one chat.js imports.
REPLACE_WITH_A_LONG_SNAPSHOT = """async (el) => {
    const url = performance.getEntriesByType("resource")
        .map((entry) => entry.name).find((name) => name.includes("live_render"));
    const live = await import(url);
    const view = live.createView(el, "");
    const html = "<p>" + "long line of text ".repeat(40) + "</p>";
    live.replaceWith(view, { settled: [0, 0, html.repeat(20)] }, "");
}"""

# The user scrolls up; resolves with where the page is two frames later (the scroll event is
# dispatched in the first frame's update, before its animation frame callbacks), never hanging
# where the scroll changed nothing and so fired no event.
SCROLL_UP_AND_SETTLE = """() => new Promise((resolve) => {
    const box = document.getElementById("messages");
    box.scrollTop = 0;
    requestAnimationFrame(() => requestAnimationFrame(() => resolve(box.scrollTop)));
})"""

# The user scrolls up; resolves once the page has had the scroll event.
SCROLL_TO_THE_TOP = """() => new Promise((resolve) => {
    const box = document.getElementById("messages");
    box.addEventListener("scroll", resolve, { once: true });
    box.scrollTop = 0;
})"""


def test_a_snapshot_that_grows_the_page_keeps_its_end_in_view(alice: Any) -> None:
    alice.set_viewport_size({"width": 390, "height": 844})
    answer = streaming_answer(alice, MARKDOWN + TAIL)
    expect(answer).to_have_attribute("data-status", "completed")
    expect(answer.locator(".content.rendered")).to_be_attached()
    alice.wait_for_function(AT_END)

    alice.evaluate(REPLACE_WITH_A_LONG_SNAPSHOT, answer.element_handle())
    alice.wait_for_function(AT_END)

    alice.evaluate(SCROLL_TO_THE_TOP)
    alice.evaluate(REPLACE_WITH_A_LONG_SNAPSHOT, answer.element_handle())
    assert alice.evaluate("document.getElementById('messages').scrollTop") == 0


# Markdown of every inline and block construct a model writes, streamed by the echo model.
RICH = """## Shopping plan

We need **pears** and *apples*, see [the list](https://example.com/list) and `cart.py` first.

- apples, **two** kilos
- pears, *ripe* ones
- plums

| fruit | kg |
|---|--:|
| apples | 2 |
| pears | 3 |

> A quote with **bold** inside.

1. wash them
2. cut them

Then a closing paragraph with `code` and **more bold text** at its very end.
"""

# Installed before the page's scripts: how much of each answer's text has arrived (UTF-16 units,
# as the page counts them), from the socket's deltas and snapshots, so that a raw construct in
# the page's tail is known by its offset in the answer.
COUNT_ARRIVALS = """(() => {
    window.arrived = {};
    const Socket = window.WebSocket;
    window.WebSocket = class extends Socket {
        constructor(...args) {
            super(...args);
            this.addEventListener("message", (event) => {
                let msg;
                try { msg = JSON.parse(event.data); } catch { return; }
                const seen = (g) => (window.arrived[g] ||= { seq: 0, total: 0 });
                if (Array.isArray(msg)) {
                    const answer = seen(msg[0]);
                    if (msg[1] === answer.seq + 1) {
                        answer.seq = msg[1];
                        answer.total += (msg[2] || "").length;
                    }
                } else if (msg.t === "snapshot" && msg.seq >= seen(msg.g).seq) {
                    Object.assign(seen(msg.g), { seq: msg.seq, total: (msg.content || "").length });
                }
            });
        }
    };
})();"""

# Every animation frame of the newest answer: its status, where its content's top is, and while
# it streams the raw markdown in view: in its tail (shown as text, each construct known by its
# offset in the answer) and elsewhere (a draft's construct not closed yet, shown as written).
WATCH_FRAMES = r"""() => {
    window.frames_seen = [];
    const RAW = /\*\*|(^|\s)\*\S|`|(^|\n)\s*#{1,6}\s|(^|\n)\s*([-+]|\d+\.)\s|\||\]\(/g;
    function textOutside(content, skip) {
        const walker = document.createTreeWalker(content, NodeFilter.SHOW_TEXT);
        const texts = [];
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            if (!node.parentElement.closest(skip)) texts.push(node.data);
        }
        return texts.join("");
    }
    function frame() {
        const answer = [...document.querySelectorAll("article.assistant")].pop();
        const content = answer && answer.querySelector(":scope > .content");
        if (content) {
            const box = document.getElementById("messages");
            const streaming = answer.dataset.status === "streaming";
            const tail = content.querySelector(".live-tail:not(.code-block)");
            const text = streaming && tail ? tail.textContent : "";
            const total = (window.arrived[answer.dataset.generation] || { total: 0 }).total;
            const offsets = [...text.matchAll(RAW)].map((m) => total - text.length + m.index);
            const elsewhere = textOutside(content, "pre, code, [hidden], .live-tail");
            const other = streaming && RAW.test(elsewhere);
            RAW.lastIndex = 0;
            window.frames_seen.push({
                at: performance.now(),
                status: answer.dataset.status,
                rendered: content.classList.contains("rendered"),
                tail_raw: offsets,
                other_raw: other,
                top: content.getBoundingClientRect().top + box.scrollTop,
            });
        }
        requestAnimationFrame(frame);
    }
    requestAnimationFrame(frame);
}"""


def _frames(page: Any) -> list[dict[str, Any]]:
    return list(page.evaluate("window.frames_seen"))


def longest_raw_ms(frames: list[dict[str, Any]]) -> float:
    """The longest time one raw construct stayed in view while the answer streamed: one in the
    tail from the first frame it showed in to the last, one elsewhere (a draft's construct not
    yet closed) for as long as any such showed without a break."""
    first: dict[int, float] = {}
    last: dict[int, float] = {}
    for frame in frames:
        for offset in frame["tail_raw"]:
            first.setdefault(offset, frame["at"])
            last[offset] = frame["at"]
    longest = max((last[offset] - first[offset] for offset in first), default=0.0)
    since = None
    for frame in frames:
        if frame["other_raw"] and since is None:
            since = frame["at"]
        elif not frame["other_raw"] and since is not None:
            longest, since = max(longest, frame["at"] - since), None
    return longest


def test_raw_markdown_shows_only_for_a_moment_while_an_answer_is_written(alice: Any) -> None:
    alice.add_init_script(COUNT_ARRIVALS)
    alice.reload()
    alice.evaluate(WATCH_FRAMES)
    answer = streaming_answer(alice, RICH)
    alice.wait_for_function(  # the table shows as one while the answer is written
        """el => el.dataset.status === "streaming" && el.querySelector(".content table td")""",
        arg=answer.element_handle(),
    )
    screenshots(alice, "live-draft")
    expect(answer).to_have_attribute("data-status", "completed")
    expect(answer.locator(".content.rendered")).to_be_attached()
    frames = [frame for frame in _frames(alice) if frame["status"] == "streaming"]
    assert len(frames) > 20, "the answer streamed over many frames"
    longest = longest_raw_ms(frames)
    shown = sum(bool(frame["tail_raw"] or frame["other_raw"]) for frame in frames)
    print(
        f"raw markdown: one construct in view for at most {longest:.0f} ms;"
        f" some in {shown} of {len(frames)} frames"
    )
    # The goal is 300 ms (the benchmark reports it); a loaded machine gets a second.
    assert longest <= 1000, f"raw markdown stayed in view for {longest:.0f} ms"
    content = answer.locator(".content")
    expect(content.locator("h2")).to_have_text("Shopping plan")
    expect(content.locator("table td.align-right")).to_have_text(["2", "3"])


def _moved_at_done(frames: list[dict[str, Any]]) -> float:
    """How far the answer's content moved between its last streaming frame and the final
    render's frames."""
    streaming = [frame["top"] for frame in frames if frame["status"] == "streaming"]
    final = [frame["top"] for frame in frames if frame["rendered"]]
    assert streaming, "frames while it streamed"
    assert final, "frames after the final render"
    return max(abs(top - streaming[-1]) for top in final)


@pytest.mark.parametrize(
    ("model", "text"),
    [("emulator/echo", RICH), ("emulator/reasoning", "Why is the sky blue?")],
    ids=["markdown", "reasoning"],
)
def test_nothing_moves_when_an_answer_ends(alice: Any, model: str, text: str) -> None:
    alice.set_viewport_size({"width": 1280, "height": 800})
    alice.add_init_script(COUNT_ARRIVALS)
    alice.reload()
    alice.evaluate(WATCH_FRAMES)
    answer = streaming_answer(alice, text, model)
    expect(answer).to_have_attribute("data-status", "completed")
    expect(answer.locator(".content.rendered")).to_be_attached()
    alice.evaluate("() => new Promise((done) => requestAnimationFrame(() => setTimeout(done, 0)))")
    moved = _moved_at_done(_frames(alice))
    print(f"{model}: the content moved {moved:.1f} px at the end")
    assert moved <= 4


# Installed before the page's scripts: the page's websockets, so that a test can drop them.
# Keeps every socket the page opens, and while `window.refuseSockets` is set gives the page a
# socket that fails at once without touching the network. (Chromium's offline emulation does not
# reliably stop a websocket to loopback; real connections to a closed port count as failures that
# Chromium then throttles, so reconnecting took longer than any bound on a busy machine.)
KEEP_SOCKETS = """(() => {
    window.sockets = [];
    window.refuseSockets = false;
    const Socket = window.WebSocket;
    class Refused extends EventTarget {
        constructor() {
            super();
            this.readyState = 0;
            setTimeout(() => {
                this.readyState = 3;
                if (this.onclose) this.onclose(new CloseEvent("close", { code: 1006 }));
            }, 0);
        }
        send() {}
        close() {}
    }
    window.WebSocket = class extends Socket {
        constructor(...args) {
            if (window.refuseSockets) return new Refused();
            super(...args);
            window.sockets.push(this);
        }
    };
})();"""


def test_a_page_that_lost_its_connection_says_it_is_reconnecting(alice: Any) -> None:
    alice.add_init_script(KEEP_SOCKETS)
    alice.reload()
    answer = streaming_answer(alice, LONG_TAIL)
    meta = answer.locator(".message-footer .meta")
    expect(answer.locator(".content")).to_contain_text("t010")
    # The browser's side of the connection is gone, and reconnecting fails until it is back.
    alice.evaluate("window.refuseSockets = true; window.sockets.forEach((s) => s.close())")
    try:
        expect(alice.locator("body")).to_have_attribute("data-socket", "closed")
        expect(meta).to_have_text(re.compile(r"reconnecting…$"))
        expect(meta).not_to_contain_text("waiting for the gateway")
    finally:
        alice.evaluate("window.refuseSockets = false")
    expect(alice.locator("body")).to_have_attribute("data-socket", "open")
    expect(answer).to_have_attribute("data-status", "completed")
    expect(answer.locator(".content")).to_contain_text("t200")
    expect(meta).not_to_contain_text("reconnecting")


# A table of eight rows and a list of long sentences, as the echo model streams them: a few
# characters a delta, each row and item over many deltas (#37).
ROWS_AND_ITEMS = (
    "## Results\n\nThe figures, then what to make of them.\n\n"
    "| name | score | note |\n|---|--:|---|\n"
    + "".join(
        f"| {name} | {n * 7} | the {name} row of the table, with a note |\n"
        for n, name in enumerate(
            ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"], 1
        )
    )
    + "\n- The first finding is that the two measures are closely related, and worth a second"
    " look.\n- The second finding is that the slow runs share one cause, which the table shows"
    " plainly.\n- The third finding is that nothing else in these figures stands out against the"
    " rest of them.\n\nThat is all.\n"
)

# Every animation frame of the newest answer while it streams: its content's height, the text
# shown after its blocks (a `.live-tail` child of the content) with how much of the answer had
# arrived, and whether a table cell shows a pipe (the cells after it run into it).
WATCH_LAYOUT = """() => {
    window.layout = [];
    function frame() {
        const answer = [...document.querySelectorAll("article.assistant")].pop();
        const content = answer && answer.querySelector(":scope > .content");
        if (content && answer.dataset.status === "streaming") {
            const below = content.querySelector(":scope > .live-tail");
            window.layout.push({
                height: content.getBoundingClientRect().height,
                below: below ? below.textContent : null,
                arrived: (window.arrived[answer.dataset.generation] || { total: 0 }).total,
                rows: content.querySelectorAll("td").length,
                cell_pipe: [...content.querySelectorAll("td, th")]
                    .some((cell) => !cell.closest("[hidden]") && cell.textContent.includes("|")),
            });
        }
        requestAnimationFrame(frame);
    }
    requestAnimationFrame(frame);
}"""


def test_rows_and_items_stay_in_place_while_they_stream(alice: Any) -> None:
    """Text after the draft (the unsettled tail rendered) stays in the draft's last row or item
    when its line ends, and the next row or item waits for its draft rather than showing as a
    raw line below the block: the answer only grows, row by row, while a table streams."""
    alice.set_viewport_size({"width": 1280, "height": 800})
    alice.add_init_script(COUNT_ARRIVALS)
    alice.reload()
    finished(alice, "A **warm** render pool.")  # so that drafts keep up from the first row
    alice.evaluate(WATCH_LAYOUT)
    answer = streaming_answer(alice, ROWS_AND_ITEMS)
    alice.wait_for_function(  # rows show as rows while the answer is written
        """el => el.dataset.status === "streaming"
            && el.querySelectorAll(".content table td").length >= 6""",
        arg=answer.element_handle(),
    )
    expect(answer).to_have_attribute("data-status", "completed")
    frames = list(alice.evaluate("window.layout"))
    split = [
        frame["below"]
        for frame in frames
        if frame["below"] and ROWS_AND_ITEMS[frame["arrived"] - len(frame["below"]) - 1] != "\n"
    ]
    assert not split, f"text of a line shown below its block: {split[:3]}"
    shrunk = [
        round(before["height"] - after["height"], 1)
        for before, after in itertools.pairwise(frames)
        if before["rows"] and before["height"] - after["height"] > 4
    ]
    assert not shrunk, f"the answer shrank (px) while its table and list streamed: {shrunk}"
    assert not any(frame["cell_pipe"] for frame in frames), "a cell showed the next one's pipe"


FORMULAS = r"""Euler: $e^{i\pi} + 1 = 0$, and it costs $5 and $10.

So:
$$
x = \frac{-b \pm \sqrt{b^2 - 4ac}}{2a}
$$

then \(x_1\) and \[\sum_{i=1}^n i = \frac{n(n+1)}{2}\] and a bad one: $\frac{$

"""


def test_formulas_render_while_they_stream_and_end_as_last_shown(alice: Any) -> None:
    answer = streaming_answer(alice, FORMULAS + LONG_TAIL)
    answer.evaluate(RECORD_LIVE_DOM)
    alice.wait_for_function(
        """el => {
            const box = el.querySelector(".content");
            return el.dataset.status === "streaming"
                && box.querySelectorAll("math").length === 4
                && box.querySelectorAll('math[display="block"]').length === 2
                && box.querySelector("code.math-source")?.textContent === "$\\\\frac{$";
        }""",
        arg=answer.element_handle(),
    )
    expect(answer).to_have_attribute("data-status", "completed", timeout=30_000)
    expect(answer.locator(".content.rendered")).to_be_attached()
    box = answer.locator(".content")
    final = box.inner_html()
    assert alice.evaluate("window.liveViews")[-1] == final  # live and final are one render
    assert "it costs $5 and $10." in box.inner_text()  # prose dollars stay text
    assert box.locator("math mfrac").count() == 2
    # MathML is drawn by the browser: a fraction is taller than a line of text
    height = box.locator(".math-block math").evaluate("m => m.getBoundingClientRect().height")
    line = box.locator("p").first.evaluate("p => parseFloat(getComputedStyle(p).lineHeight)")
    assert height > line
    screenshots(alice, "math", lambda page: box.locator(".math-block").scroll_into_view_if_needed())


def test_scrolled_up_while_it_streams_a_button_jumps_to_the_end_and_follows(alice: Any) -> None:
    alice.set_viewport_size({"width": 390, "height": 844})
    jump = alice.get_by_role("button", name="Jump to the latest")
    answer = streaming_answer(alice, MARKDOWN + LONG_TAIL)
    alice.wait_for_function(
        """el => el.dataset.status === "streaming" && el.querySelector(".content table")""",
        arg=answer.element_handle(),
    )
    expect(jump).to_be_hidden()  # the page follows the end: nothing to jump to
    poll(
        lambda: alice.evaluate(SCROLL_UP_AND_SETTLE) == 0,
        what="the page scrolled to the top and left there",
    )
    expect(jump).to_be_visible()
    screenshots(alice, "jump-to-latest")
    jump.click()
    alice.wait_for_function(AT_END)
    expect(jump).to_be_hidden()
    length = len(answer.locator(".content").inner_text())
    alice.wait_for_function(  # more arrives, and the page follows it again
        """([el, n]) => el.querySelector(".content").innerText.length > n + 100""",
        arg=[answer.element_handle(), length],
    )
    alice.wait_for_function(AT_END)

    poll(
        lambda: alice.evaluate(SCROLL_UP_AND_SETTLE) == 0,
        what="the page scrolled to the top and left there",
    )
    expect(jump).to_be_visible()
    expect(answer).to_have_attribute("data-status", "completed", timeout=30_000)
    expect(jump).to_be_hidden()  # an answer that has ended has no end to follow
    assert alice.evaluate("document.getElementById('messages').scrollTop") == 0


# A table and a display formula as a model writes them (#45): each cell fills from the left in
# its own column, the header is one row of its cells from its first, and the formula's source
# shows as written (its `\,` too) until it closes, then is drawn at once.
TABLE_AND_FORMULA = (
    "Prices:\n\n| fruit | price |\n|---|--:|\n| apple | 2 |\n| banana | 3 |\n\n"
    "So:\n$$\nx = a\\,b\n$$\n\n"
)
HEADER = ["fruit", "price"]
ROWS = [["apple", "2"], ["banana", "3"]]

# Every animation frame of the newest answer while it streams: the text of each visible table
# cell by row, whether a formula is drawn, the content's text, and how much had arrived.
WATCH_CELLS = """() => {
    window.cells_seen = [];
    function frame() {
        const answer = [...document.querySelectorAll("article.assistant")].pop();
        const content = answer && answer.querySelector(":scope > .content");
        if (content && answer.dataset.status === "streaming") {
            const rows = [...content.querySelectorAll("tr")]
                .filter((tr) => !tr.closest("[hidden]"));
            window.cells_seen.push({
                at: performance.now(),
                arrived: (window.arrived[answer.dataset.generation] || { total: 0 }).total,
                header: rows.filter((tr) => tr.querySelector("th"))
                    .map((tr) => [...tr.cells].map((cell) => cell.textContent.trim())),
                body: rows.filter((tr) => !tr.querySelector("th"))
                    .map((tr) => [...tr.cells].map((cell) => cell.textContent.trim())),
                math: content.querySelector(".math-block math") !== null,
                text: content.innerText,
            });
        }
        requestAnimationFrame(frame);
    }
    requestAnimationFrame(frame);
}"""


def test_tables_and_formulas_stay_in_place_while_they_stream(alice: Any) -> None:
    alice.add_init_script(COUNT_ARRIVALS)
    alice.reload()
    finished(alice, "A **warm** render pool.")  # so that drafts keep up from the first cell
    alice.evaluate(WATCH_CELLS)
    answer = streaming_answer(alice, TABLE_AND_FORMULA + TAIL)
    alice.wait_for_function(  # the second row fills while the answer is written
        """el => el.dataset.status === "streaming"
            && [...el.querySelectorAll(".content td")]
                .some((td) => td.textContent.includes("ban"))""",
        arg=answer.element_handle(),
    )
    screenshots(alice, "live-table")
    expect(answer).to_have_attribute("data-status", "completed", timeout=30_000)
    frames = list(alice.evaluate("window.cells_seen"))
    assert len(frames) > 20, "the answer streamed over many frames"
    for frame in frames:
        for row in frame["header"]:
            assert len(row) <= len(HEADER), frame  # never a column the header does not have
            assert all(HEADER[i].startswith(cell) for i, cell in enumerate(row)), frame
        for row, expected in zip(frame["body"], ROWS, strict=False):
            # A cell shows only the start of its own text: nothing from the next column.
            assert all(expected[i].startswith(cell) for i, cell in enumerate(row)), frame
        assert "a,b" not in frame["text"], "the formula's \\, shown as a comma"
    assert any(frame["body"] and frame["body"][0][0] == "apple" for frame in frames)
    # The formula is drawn as soon as its closing `$$` has arrived, not with the next block.
    closed = TABLE_AND_FORMULA.index("$$\n\n") + 2
    since = next(frame["at"] for frame in frames if frame["arrived"] >= closed)
    drawn = next(frame["at"] for frame in frames if frame["math"])
    print(f"the formula was drawn {drawn - since:.0f} ms after its closing $$ arrived")
    assert drawn - since <= 1000
    expect(answer.locator(".content .math-block math")).to_have_count(1)


def test_the_header_shows_no_markdown_before_the_title_arrives(alice: Any) -> None:
    answer = streaming_answer(alice, "## Plan **fast**: `cart.py`\n\n" + TAIL)
    expect(alice.locator("#conversation-title")).to_have_text("Plan fast: cart.py")
    expect(answer).to_have_attribute("data-status", "streaming")
