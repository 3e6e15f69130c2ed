"""An answer's parts in real Chromium: the Thinking and tool panes, media, citations, and model
text that tries to be markup."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import (
    content,
    finished,
    offer_model,
    send,
    wait_for_more_text,
    wait_for_text,
)

pytestmark = [pytest.mark.browser]

WEB_URL = re.compile(r"^https?://", re.I)


def loaded_image(page: Any, image: Any) -> int:
    """The natural width of `image` once it has decoded (0 if it never does)."""
    image.scroll_into_view_if_needed()
    handle = image.element_handle()
    page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=handle)
    return int(image.evaluate("img => img.naturalWidth"))


@pytest.mark.paced
def test_thinking_streams_in_an_open_pane_timed_and_folds_as_the_answer_begins(alice: Any) -> None:
    send(alice, "Why is the sky blue?", "emulator/reasoning")
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    answer = alice.locator("article.assistant").last
    pane = answer.locator("details.reasoning-pane")
    thinking = pane.locator(".reasoning")
    expect(thinking).not_to_be_empty()
    first = thinking.inner_text()
    expect(pane).to_have_js_property("open", True)
    # Its title counts the seconds while the model thinks, then says how long it thought.
    expect(pane.locator("summary")).to_have_text(re.compile(r"^Thinking… \d+ s$"))
    wait_for_more_text(answer, len(first), ".reasoning")  # reasoning grows in view
    wait_for_text(answer)
    # Folded once the answer begins, as the final render shows it: the end moves nothing.
    expect(pane).to_have_js_property("open", False)
    expect(pane.locator("summary")).to_have_text(re.compile(r"^Thought for \d+ s$"))
    expect(answer).to_have_attribute("data-status", "completed", timeout=20_000)
    expect(pane.locator("summary")).to_have_text(re.compile(r"^Thought for \d+ s$"))
    expect(pane).to_have_js_property("open", False)
    expect(thinking).not_to_be_visible()
    pane.locator("summary").click()
    expect(thinking).to_be_visible()
    expect(thinking).to_contain_text("The user asks about sky and blue.")
    assert "The user asks" not in content(answer)
    pane.locator("summary").click()
    expect(pane).to_have_js_property("open", False)


@pytest.mark.paced
def test_tool_calls_show_in_their_own_pane(alice: Any) -> None:
    finished(alice, "warm up", "emulator/echo")
    # Record what the live pane shows while the answer is still streaming.
    alice.evaluate(
        """() => {
            window.toolsSeen = [];
            new MutationObserver(() => {
                const live = 'article.assistant[data-status="streaming"] .tool-call';
                for (const call of document.querySelectorAll(live)) {
                    const name = call.querySelector(".tool-name").textContent;
                    window.toolsSeen.push([name, call.querySelector(".tool-args").textContent]);
                }
            }).observe(document.getElementById("messages"),
                       {subtree: true, childList: true, characterData: true});
        }"""
    )
    # Slow enough that the page sees it stream: a turn is read back from the database as it is
    # rendered, so on a busy machine a quick answer could be on the page finished already.
    model = "emulator/tools?tokens_per_second=8&ttft_ms=1000"
    offer_model(alice, model)
    send(alice, "What is the weather in Oslo?", model)
    answer = alice.locator("article.assistant").last
    expect(answer).to_have_attribute("data-status", "completed", timeout=20_000)
    pane = answer.get_by_role("region", name="Tool calls")
    expect(pane).to_be_visible()
    expect(pane.locator(".tool-name")).to_have_text("get_weather")
    assert json.loads(pane.locator(".tool-args").inner_text()) == {
        "city": "Oslo",
        "unit": "celsius",
    }
    expect(answer.locator(".meta")).to_contain_text("finish: tool_calls")
    seen = alice.evaluate("window.toolsSeen")
    assert any(name == "get_weather" and args for name, args in seen), "streamed into the pane"
    assert content(answer).strip() == ""


def test_an_image_is_displayed(alice: Any) -> None:
    answer = finished(alice, "A picture of otters", "emulator/image")
    image = answer.locator(".attachments img.image")
    expect(image).to_have_count(1)
    # On Numes emulator/image is an image model (`POST /images`): its image is stored and served
    # from our origin (tests/browser/test_image_generation.py has the rest).
    assert re.fullmatch(r"/m/\d+/attachments/0/", image.get_attribute("src") or "")
    assert loaded_image(alice, image) == 32


def test_citations_are_safe_links(alice: Any) -> None:
    answer = finished(alice, "otters rivers", "emulator/citations")
    links = answer.locator(".citations a")
    expect(links).to_have_count(2)
    for link in links.all():
        assert WEB_URL.match(link.get_attribute("href") or "")
        assert link.get_attribute("rel") == "noopener nofollow"
        assert link.get_attribute("target") == "_blank"
    expect(links.first).to_contain_text("Source 1")
    hrefs = answer.locator("a[href]").evaluate_all("links => links.map(a => a.href)")
    assert all(WEB_URL.match(h) or "/attachments/" in h for h in hrefs)


def test_audio_plays_from_the_server(alice: Any, server_url: str) -> None:
    answer = finished(alice, "otters", "emulator/audio")
    player = answer.locator("audio[controls]")
    expect(player).to_have_count(1)
    src = player.get_attribute("src")
    assert src is not None
    assert re.fullmatch(r"/m/\d+/attachments/\d+/", src), "our origin, not the gateway's URL"
    handle = player.element_handle()
    alice.wait_for_function("audio => audio.readyState >= 1 && audio.duration > 0.5", arg=handle)
    response = alice.request.get(server_url + src)
    assert response.ok
    assert response.headers["content-type"] == "audio/wav"
    body = response.body()
    assert body[:4] == b"RIFF"
    assert body[8:12] == b"WAVE"
    expect(answer.locator("figure.audio figcaption")).to_contain_text("spoken answer about otters")


def test_files_download_as_attachments(alice: Any, server_url: str) -> None:
    answer = finished(alice, "otters", "emulator/files")
    table = answer.get_by_role("link", name="otters.csv")
    with alice.expect_download() as info:
        table.click()
    download = info.value
    assert download.suggested_filename == "otters.csv"
    with open(download.path(), "rb") as saved:
        assert saved.read().startswith(b"word,letters,reversed\r\notters,6,sretto")
    response = alice.request.get(server_url + (table.get_attribute("href") or ""))
    assert response.headers["content-disposition"] == 'attachment; filename="otters.csv"'
    assert response.headers["content-type"] == "application/octet-stream"
    assert response.headers["x-content-type-options"] == "nosniff"
    expect(answer.get_by_role("link", name="otters.png")).to_be_visible()
    assert loaded_image(alice, answer.locator("figure.file img.preview")) == 32


@pytest.mark.paced
def test_markup_in_model_text_stays_text(alice: Any) -> None:
    dialogs: list[str] = []
    alice.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    payload = (
        "<img src=x onerror=alert(1)> <script>alert(2)</script> [x](javascript:alert(3)) "
        '<a href="javascript:alert(4)">a</a> ![i](data:image/svg+xml;base64,PHN2Zz4=)'
    )
    send(alice, payload, "emulator/echo")
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    answer = alice.locator("article.assistant").last
    wait_for_text(answer, minimum=10)  # the streaming view: text nodes only
    expect(answer).to_have_attribute("data-status", "completed", timeout=20_000)
    rendered = answer.locator(".content.rendered")
    expect(rendered).to_contain_text("<img src=x onerror=alert(1)>")
    expect(rendered).to_contain_text("<script>alert(2)</script>")
    expect(rendered).to_contain_text("[x](javascript:alert(3))")
    expect(alice.locator("article.user").last).to_contain_text("<script>alert(2)</script>")
    for selector in ("img", "script", "a", "svg"):
        expect(answer.locator(f".content {selector}")).to_have_count(0)
    assert alice.locator('[href^="javascript:" i], [src^="javascript:" i]').count() == 0
    assert alice.locator("[onerror], [onclick]").count() == 0
    alice.reload()  # the page as stored renders the same way; returns once it has loaded
    expect(alice.locator("article.assistant").last.locator(".content")).to_contain_text(
        "<img src=x onerror=alert(1)>"
    )
    # An open dialog blocks the page until the handler above dismisses it, so this round trip
    # through the page's event loop returns only after any alert raised so far was recorded.
    alice.evaluate(
        "() => new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve)))"
    )
    assert dialogs == []
