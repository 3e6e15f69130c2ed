"""An answer looks finished while it streams: its settled blocks arrive rendered, the final render
changes nothing, thinking and quiet streams are shown for what they are."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import send

pytestmark = [pytest.mark.browser]

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
    answer = streaming_answer(alice, MARKDOWN + TAIL)
    answer.evaluate(RECORD_LIVE_DOM)
    alice.wait_for_function(
        """el => el.dataset.status === "streaming"
            && el.querySelector(".content pre code span.k")""",
        arg=answer.element_handle(),
    )
    box = answer.locator(".content")
    expect(box.locator("h2")).to_have_text("Shopping plan")
    expect(box.locator("ul > li")).to_have_text(["apples", "pears"])
    expect(box.locator("ul strong")).to_have_text("pears")
    expect(box.locator("table td.align-right")).to_have_text("2")
    expect(box.locator(".code-lang")).to_have_text("python")
    assert "##" not in box.inner_text()
    assert answer.get_attribute("data-status") == "streaming"

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
    answer = streaming_answer(
        alice, "<think>Weighing apples against pears, slowly.</think>Pears win, 3 to 2."
    )
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
    alice.evaluate("document.getElementById('messages').scrollTop = 0")
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
