"""Finding and keeping conversations, the phone layout and the keyboard's focus, in Chromium:
search as you type, rename and delete in place, a follow-up moving to the top, export, the
drawer at 390 x 844, focus in the message box, and the site icon."""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import choose_model, screenshots, send

pytestmark = [pytest.mark.browser]

PHONE = {"width": 390, "height": 844}


def word() -> str:
    """A word no other test's conversation holds (the server's database is the session's)."""
    return f"quokka{secrets.token_hex(3)}"


def new_conversation(page: Any, server_url: str, text: str) -> str:
    """A finished conversation started from the home page with `text`; its URL."""
    page.goto(f"{server_url}/")
    answer = send(page, text, "emulator/echo")
    expect(page).to_have_url(re.compile(r"/c/\d+/$"))
    expect(answer).to_have_attribute("data-status", "completed", timeout=15_000)
    return str(page.url)


def entry(page: Any, text: str) -> Any:
    """The sidebar entry whose link reads `text`."""
    return page.locator("#conversation-groups li").filter(
        has=page.get_by_role("link", name=text, exact=True)
    )


def open_drawer(page: Any) -> None:
    """On a phone, the sidebar's drawer opened (for a picture of it)."""
    menu = page.get_by_role("button", name="Menu", exact=True)
    if menu.is_visible() and menu.get_attribute("aria-expanded") == "false":
        menu.click()
        expect(page.get_by_role("navigation", name="Conversations")).to_be_visible()
        page.wait_for_function(
            "() => document.getAnimations().every(a => a.playState !== 'running')"
        )


def test_search_as_you_type_shows_highlighted_matches_in_place_of_the_list(
    alice: Any, server_url: str
) -> None:
    token = word()
    url = new_conversation(alice, server_url, f"Habits of the {token} <b>not bold</b>")
    new_conversation(alice, server_url, "Something else entirely")
    searches: list[str] = []
    alice.on(
        "request",
        lambda request: searches.append(request.url) if "/search/" in request.url else None,
    )
    box = alice.get_by_label("Search conversations")
    box.press_sequentially(token, delay=30)
    hit = alice.locator("#search-results .search-hits a")
    expect(hit).to_have_count(1)
    expect(hit.locator(".hit-title mark")).to_have_text(token)
    expect(hit.locator(".hit-snippet mark")).to_have_text(token)
    expect(hit.locator(".hit-title")).to_have_text(f"Habits of the {token} <b>not bold</b>")
    expect(alice.locator("#search-results b")).to_have_count(0)  # model text stays text
    expect(alice.locator("#search-results .search-summary")).to_have_text("1 conversation matches")
    expect(alice.locator("#conversation-groups")).to_be_hidden()
    assert 1 <= len(searches) < len(token) / 2, f"debounced: {len(searches)} requests"
    assert searches[-1].endswith(f"q={token}")

    box.fill(f"{token}zzz")
    expect(alice.locator("#search-results .no-matches")).to_have_text(
        f"No matches for “{token}zzz”."
    )
    box.press("Escape")
    expect(box).to_have_value("")
    expect(alice.locator("#search-results")).to_be_hidden()
    expect(alice.locator("#conversation-groups")).to_be_visible()

    box.fill(token)
    hit.click()
    expect(alice).to_have_url(url)
    expect(alice.locator("#conversation-title")).to_contain_text(token)


def test_a_search_result_shows_the_answers_words_not_its_markdown(
    alice: Any, server_url: str
) -> None:
    token = word()
    new_conversation(alice, server_url, f"## About the **{token}**\n\nIt *swims* `fast`.")
    alice.get_by_label("Search conversations").fill(token)
    snippet = alice.locator("#search-results .search-hits .hit-snippet")
    expect(snippet).to_have_text(f"About the {token} It swims fast.")
    expect(snippet.locator("mark")).to_have_text(token)
    expect(snippet.locator("*")).to_have_count(1)  # our <mark>, and no markup of the model's
    screenshots(alice, "search-plain-snippet", prepare=open_drawer)


def test_rename_in_place_updates_the_sidebar_and_the_tab_title(alice: Any, server_url: str) -> None:
    token = word()
    other, shown = f"first {token}", f"second {token}"
    new_conversation(alice, server_url, other)
    new_conversation(alice, server_url, shown)
    expect(alice).to_have_title(f"{shown} · Gateway Chat")

    # Another conversation's entry: only the entry changes.
    item = entry(alice, other)
    item.hover()
    item.locator("summary").click()
    name = item.get_by_label("New name")
    expect(name).to_be_focused()
    # The menu's "Move to" list loads as it opens; its request's end leaves the focus put.
    expect(item.locator(".item-move .note")).to_be_attached()
    item.page.wait_for_load_state("networkidle")
    expect(name).to_be_focused()
    name.fill(f"renamed {token}")
    name.press("Enter")
    renamed = entry(alice, f"renamed {token}")
    expect(renamed).to_be_visible()
    expect(renamed.get_by_role("link")).to_be_focused()
    expect(alice).to_have_title(f"{shown} · Gateway Chat")
    expect(alice.locator("#conversation-title")).to_have_text(shown)
    expect(entry(alice, shown)).to_have_attribute("aria-current", "page")

    # The one on screen: its header and the tab's title change too.
    item = entry(alice, shown)
    item.locator("summary").click()
    item.get_by_label("New name").fill(f"on screen {token}")
    item.get_by_role("button", name="Rename", exact=True).click()
    expect(alice.locator("#conversation-title")).to_have_text(f"on screen {token}")
    expect(alice).to_have_title(f"on screen {token} · Gateway Chat")
    expect(entry(alice, f"on screen {token}")).to_have_attribute("aria-current", "page")

    # Delete another from its menu: the page stays.
    item = entry(alice, f"renamed {token}")
    item.hover()
    item.locator("summary").click()
    delete = item.get_by_role("button", name="Delete", exact=True)
    expect(delete).to_be_visible()
    before = delete.bounding_box()
    # The "Move to" part loads after the menu opened: it moves nothing above it (it moved Delete
    # under the pointer, and the click missed).
    expect(item.locator(".item-move > *").first).to_be_attached()
    assert delete.bounding_box() == before
    alice.once("dialog", lambda dialog: dialog.accept())
    delete.click()
    expect(entry(alice, f"renamed {token}")).to_have_count(0)
    expect(alice.locator("#conversation-title")).to_have_text(f"on screen {token}")
    alice.reload()
    expect(entry(alice, f"on screen {token}")).to_be_visible()
    expect(entry(alice, f"renamed {token}")).to_have_count(0)


def test_renaming_from_the_header_renames_the_tab(alice: Any, server_url: str) -> None:
    """Issue 11's bug: the tab kept the old title."""
    token = word()
    new_conversation(alice, server_url, f"tab {token}")
    expect(alice).to_have_title(f"tab {token} · Gateway Chat")
    alice.locator("details.conversation-actions > summary").click()
    alice.get_by_label("Title", exact=True).fill(f"renamed tab {token}")
    alice.get_by_role("button", name="Rename", exact=True).click()
    expect(alice.locator("#conversation-title")).to_have_text(f"renamed tab {token}")
    expect(alice).to_have_title(f"renamed tab {token} · Gateway Chat")


def test_a_follow_up_moves_the_conversation_to_the_top(alice: Any, server_url: str) -> None:
    """Issue 11's bug: it stayed where it was until a reload."""
    token = word()
    older = new_conversation(alice, server_url, f"older {token}")
    new_conversation(alice, server_url, f"newer {token}")
    first = alice.locator("#conversation-list > li").first
    expect(first).to_contain_text(f"newer {token}")
    alice.goto(older)
    answer = send(alice, "a follow-up", "emulator/echo")
    expect(answer).to_have_attribute("data-status", "completed", timeout=15_000)
    expect(first).to_contain_text(f"older {token}")
    expect(alice.locator("#conversation-list > li", has_text=f"older {token}")).to_have_count(1)
    expect(alice.locator("#conversation-list > li.current")).to_contain_text(f"older {token}")
    expect(alice.locator("#conversation-list > li").nth(1)).to_contain_text(f"newer {token}")


def test_export_downloads_markdown_and_json(alice: Any, server_url: str) -> None:
    token = word()
    sent = f"export {token}\n\n# Findings\n\nSome.\n\n## Details\n\nMore."
    new_conversation(alice, server_url, sent)
    alice.locator("details.conversation-actions > summary").click()
    with alice.expect_download() as markdown:
        alice.get_by_role("link", name="Markdown").click()
    assert re.fullmatch(rf"export-{token}-\d+\.md", markdown.value.suggested_filename)
    text = Path(markdown.value.path()).read_text()
    assert text.startswith(f"# export {token}\n")
    assert "- Model: `emulator/echo`" in text
    # The answer's own headings nest under its "## Assistant" (the echo's are the message's).
    answer = text[text.index("## Assistant") :]
    assert "\n### Findings\n" in answer
    assert "\n#### Details\n" in answer
    with alice.expect_download() as download:
        alice.get_by_role("link", name="JSON").click()
    assert re.fullmatch(rf"export-{token}-\d+\.json", download.value.suggested_filename)
    exported = json.loads(Path(download.value.path()).read_text())
    messages = exported["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[1]["parent"] == messages[0]["id"]
    assert messages[1]["content"] == sent  # the echo, as it came
    assert messages[1]["generation"]["upstream_id"]
    assert messages[1]["generation"]["cost"]["unit"] == "usd"


def test_on_a_phone_the_sidebar_is_a_drawer_behind_the_menu_button(
    alice: Any, server_url: str
) -> None:
    token = word()
    url = new_conversation(alice, server_url, f"phone {token}")
    alice.set_viewport_size(PHONE)
    alice.goto(f"{server_url}/")
    button = alice.get_by_role("button", name="Menu", exact=True)
    drawer = alice.get_by_role("navigation", name="Conversations")
    expect(button).to_be_visible()
    expect(button).to_have_attribute("aria-controls", "sidebar")
    expect(button).to_have_attribute("aria-expanded", "false")
    expect(drawer).to_be_hidden()

    button.click()
    expect(button).to_have_attribute("aria-expanded", "true")
    close = alice.get_by_role("button", name="Close the menu")
    expect(close).to_be_focused()
    for part in (
        drawer.get_by_role("link", name="New chat", exact=True),
        drawer.get_by_label("Search conversations"),
        drawer.get_by_role("link", name=f"phone {token}"),
        drawer.locator("#month-spend"),
        drawer.get_by_role("button", name="Sign out"),
    ):
        expect(part).to_be_in_viewport()
    assert alice.evaluate("document.querySelector('main.chat').inert")

    alice.keyboard.press("Escape")
    expect(button).to_have_attribute("aria-expanded", "false")
    expect(drawer).to_be_hidden()
    expect(button).to_be_focused()
    assert not alice.evaluate("document.querySelector('main.chat').inert")

    button.click()
    expect(close).to_be_focused()
    alice.mouse.click(PHONE["width"] - 20, PHONE["height"] // 2)  # beside the drawer
    expect(drawer).to_be_hidden()
    expect(button).to_have_attribute("aria-expanded", "false")

    button.click()
    close.click()
    expect(drawer).to_be_hidden()

    # Search from the drawer, and go to a hit.
    button.click()
    drawer.get_by_label("Search conversations").press_sequentially(token, delay=20)
    expect(drawer.locator(".search-hits mark").first).to_have_text(token)
    drawer.locator(".search-hits a").first.click()
    expect(alice).to_have_url(url)
    expect(drawer).to_be_hidden()
    expect(alice.get_by_label("Message")).to_be_focused()


# The messages scroll, and their end is in view.
AT_THE_END = """() => {
    const box = document.getElementById("messages");
    const below = box.scrollHeight - box.scrollTop - box.clientHeight;
    return box.scrollHeight > box.clientHeight && below < 2;
}"""


@pytest.mark.parametrize("size", [PHONE, {"width": 1280, "height": 800}], ids=["phone", "desktop"])
def test_a_conversation_opened_from_the_sidebar_or_history_shows_its_end(
    alice: Any, server_url: str, size: dict[str, int]
) -> None:
    token = word()
    alice.set_viewport_size(size)
    long = new_conversation(alice, server_url, "\n".join(f"{token} {n}" for n in range(40)))
    short = new_conversation(alice, server_url, f"short {token}")

    def open_from_sidebar(title: str) -> None:
        open_drawer(alice)
        entry(alice, title).get_by_role("link").click()

    def at_the_end(url: str) -> None:
        expect(alice).to_have_url(url)
        alice.wait_for_function(AT_THE_END)

    open_from_sidebar(f"{token} 0")
    at_the_end(long)
    open_from_sidebar(f"short {token}")
    expect(alice).to_have_url(short)
    open_from_sidebar(f"{token} 0")
    at_the_end(long)
    alice.go_back()
    expect(alice).to_have_url(short)
    alice.go_back()
    at_the_end(long)
    alice.go_forward()
    expect(alice).to_have_url(short)
    alice.go_forward()
    at_the_end(long)

    # What history put back works as before: Enter in the message box sends.
    box = alice.get_by_label("Message", exact=True)
    box.fill(f"after history {token}")
    box.press("Enter")
    expect(alice.locator("article.user").last).to_have_text(f"after history {token}")


def test_focus_is_in_the_message_box_on_every_load_and_after_sending(
    alice: Any, server_url: str
) -> None:
    box = alice.get_by_label("Message")
    expect(box).to_be_focused()
    expect(alice.locator(".first-hint")).to_contain_text("press Enter to send it")
    choose_model(alice, "emulator/echo")
    expect(alice.locator("[data-selected-model]")).to_have_text("Emulator: echo")

    # Sent with the button, not the keyboard: a new conversation swaps in the whole chat.
    box.fill(f"focus {word()}")
    alice.get_by_role("button", name="Send").click()
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    expect(alice.locator("article.assistant").last).to_have_attribute(
        "data-status", "completed", timeout=15_000
    )
    expect(box).to_be_focused()
    expect(alice.locator(".first-screen")).to_have_count(0)

    box.fill("and a follow-up")
    alice.get_by_role("button", name="Send").click()
    expect(alice.locator("article.assistant")).to_have_count(2)
    expect(box).to_be_focused()
    expect(alice.locator("article.assistant").last).to_have_attribute(
        "data-status", "completed", timeout=15_000
    )

    alice.reload()
    expect(box).to_be_focused()
    alice.locator("#conversation-list a").first.focus()
    alice.get_by_role("link", name="New chat", exact=True).click()
    expect(alice).to_have_url(f"{server_url}/")
    expect(box).to_be_focused()


def test_no_page_asks_for_a_missing_icon(alice: Any, browser: Any, server_url: str) -> None:
    """Issue 11's bug: every page logged a 404 for /favicon.ico, which a browser asks for when a
    page names no icon (headless Chromium does not ask, so the test asks as a browser would)."""
    new_conversation(alice, server_url, f"icon {word()}")
    anonymous = browser.new_context()
    try:
        for page, path in (
            (alice, alice.url),
            (anonymous.new_page(), f"{server_url}/accounts/login/"),
        ):
            seen: list[Any] = []
            page.on("response", lambda response, seen=seen: seen.append(response))
            page.goto(path)
            href = page.evaluate("document.querySelector('link[rel~=icon]')?.href ?? null")
            assert href, f"{path} names no icon: a browser asks for /favicon.ico"
            icon = next((r for r in seen if r.url == href), None) or page.wait_for_event(
                "response", lambda r, href=href: r.url == href
            )
            assert icon.status == 200
            assert icon.headers["content-type"].startswith("image/svg+xml")
            # What a page that names no icon (the admin's) makes the browser ask for.
            favicon = page.goto(f"{server_url}/favicon.ico")
            assert favicon is not None
            assert favicon.status == 200
            assert favicon.headers["content-type"].startswith("image/svg+xml")
            assert [r.url for r in seen if r.status == 404] == []
    finally:
        anonymous.close()
