"""Keeping many conversations in Chromium, on a desktop and a 390 x 844 phone: pin, archive and
restore, folders (made, filled from the menu and by dragging on a desktop, folded across a
reload, renamed, deleted), select mode (archive and delete several), and importing an export.

Each test signs in a user of its own, so its sidebar holds only what it made.
"""

from __future__ import annotations

import io
import json
import secrets
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import PASSWORD, manage_shell, screenshots, sign_in

pytestmark = [pytest.mark.browser]

SIZES = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}
FIXTURES = Path(__file__).parent.parent / "fixtures" / "imports"
RECORD_CSP = """
window.cspViolations = [];
document.addEventListener("securitypolicyviolation", (event) => {
    const { effectiveDirective, sourceFile, lineNumber } = event;
    window.cspViolations.push(`${effectiveDirective} ${sourceFile}:${lineNumber}`);
});
"""


@pytest.fixture(params=list(SIZES))
def size(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def user(server_env: dict[str, str]) -> str:
    """A user of this test's own, with five conversations, newest first: "topic 1" .. "topic 5"."""
    name = f"org{secrets.token_hex(4)}"
    manage_shell(
        server_env,
        "from datetime import timedelta\n"
        "from django.contrib.auth import get_user_model\n"
        "from django.utils import timezone\n"
        "from chatapp.conversations.models import Conversation, Message\n"
        f"user = get_user_model().objects.create_user({name!r}, password={PASSWORD!r})\n"
        "for n in range(5, 0, -1):\n"
        "    c = Conversation.objects.create(user=user, title=f'topic {n}')\n"
        "    Message.objects.create(conversation=c, role='user', content=f'about topic {n}')\n"
        "    Conversation.objects.filter(pk=c.pk).update(\n"
        "        updated_at=timezone.now() - timedelta(minutes=n))\n",
    )
    return name


@pytest.fixture
def page(browser: Any, server_url: str, user: str, size: str) -> Iterator[Any]:
    page = sign_in(browser, server_url, user)
    page.add_init_script(RECORD_CSP)
    page.set_viewport_size(SIZES[size])
    page.reload()
    yield page
    assert page.evaluate("window.cspViolations") == []
    page.context.close()


def sidebar(page: Any) -> Any:
    """The sidebar, opened first on a phone (its drawer)."""
    menu = page.get_by_role("button", name="Menu", exact=True)
    if menu.is_visible() and menu.get_attribute("aria-expanded") == "false":
        menu.click()
    nav = page.get_by_role("navigation", name="Conversations")
    expect(nav).to_be_visible()
    page.wait_for_function("() => document.getAnimations().every(a => a.playState !== 'running')")
    return nav


def entry(page: Any, title: str) -> Any:
    return page.locator("#conversation-groups li").filter(
        has=page.get_by_role("link", name=title, exact=True)
    )


def menu_of(page: Any, title: str) -> Any:
    """The entry's ⋯ menu, opened; its panel."""
    item = entry(page, title)
    item.hover()
    if item.locator(".item-menu[open]").count() == 0:
        item.locator(".item-menu > summary").click()
    panel = item.locator(".item-menu-panel")
    expect(panel).to_be_visible()
    return panel


def listed(page: Any) -> list[str]:
    links = page.locator("#conversation-groups li > a")
    return [text.strip() for text in links.all_inner_texts()]


def test_pin_puts_a_conversation_first_and_archive_takes_it_out_until_restored(
    page: Any, server_url: str, size: str
) -> None:
    sidebar(page)
    expect(page.locator("#conversation-groups li > a").first).to_have_text("topic 1")
    menu_of(page, "topic 4").get_by_role("button", name="Pin", exact=True).click()
    pinned = page.locator(".pinned-group")
    expect(pinned.get_by_role("heading", name="Pinned")).to_be_visible()
    expect(pinned.get_by_role("link", name="topic 4", exact=True)).to_be_visible()
    assert listed(page)[0] == "topic 4"
    # The keyboard's focus stays on the entry it pinned.
    expect(entry(page, "topic 4").get_by_role("link")).to_be_focused()

    menu_of(page, "topic 2").get_by_role("button", name="Archive", exact=True).click()
    expect(entry(page, "topic 2")).to_have_count(0)
    expect(page.get_by_role("link", name="Archived (1)")).to_be_visible()
    # Search still finds it.
    page.get_by_label("Search conversations").fill("topic 2")
    expect(page.locator("#search-results .search-hits a").first).to_contain_text("topic 2")
    page.get_by_label("Search conversations").fill("")
    screenshots(page, "organise-pinned", lambda p: sidebar(p))

    sidebar(page).get_by_role("link", name="Archived (1)").click()
    expect(page.get_by_role("heading", name="Archived conversations")).to_be_visible()
    screenshots(page, "organise-archived")
    row = page.locator(".archived-list li").filter(has_text="topic 2")
    row.get_by_role("button", name="Restore").click()
    expect(row).to_have_count(0)
    page.goto(f"{server_url}/")
    sidebar(page)
    expect(entry(page, "topic 2")).to_be_visible()
    assert listed(page) == ["topic 4", "topic 1", "topic 2", "topic 3", "topic 5"]


def test_folders_are_made_filled_folded_renamed_and_deleted(
    page: Any, server_url: str, size: str
) -> None:
    nav = sidebar(page)
    nav.get_by_text("New folder", exact=True).click()
    name = page.get_by_label("Folder name", exact=True)
    expect(name).to_be_focused()
    name.fill("Recipes")
    name.press("Enter")
    folder = page.locator("section.folder").filter(has_text="Recipes")
    expect(folder.get_by_text("Empty: move a conversation here")).to_be_visible()

    # Moved by the entry's menu (keyboard: the form is in the menu's panel).
    panel = menu_of(page, "topic 3")
    panel.get_by_label("Folder").select_option(label="Recipes")
    panel.get_by_role("button", name="Move", exact=True).click()
    expect(folder.get_by_role("link", name="topic 3", exact=True)).to_be_visible()

    if size == "desktop":  # dragged onto the folder's heading
        entry(page, "topic 5").get_by_role("link").drag_to(folder.locator(".folder-toggle"))
        expect(folder.get_by_role("link", name="topic 5", exact=True)).to_be_visible()
        # And out again, onto the date groups.
        folder.get_by_role("link", name="topic 5", exact=True).drag_to(
            page.locator(".unfiled .date-heading").first
        )
        expect(folder.get_by_role("link", name="topic 5", exact=True)).to_have_count(0)
        expect(entry(page, "topic 5")).to_be_visible()
    screenshots(page, "organise-folders", lambda p: sidebar(p))
    sidebar(page)

    # Folded, and still folded after a reload.
    toggle = folder.get_by_role("button", name="Recipes")
    with page.expect_response(lambda response: "/collapse/" in response.url):
        toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(folder.get_by_role("link", name="topic 3", exact=True)).to_be_hidden()
    page.reload()
    sidebar(page)
    toggle = page.locator("section.folder").get_by_role("button", name="Recipes")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    toggle.press("Enter")  # the keyboard opens it again
    expect(page.get_by_role("link", name="topic 3", exact=True)).to_be_visible()

    # Renamed, then deleted: its conversation stays.
    folder = page.locator("section.folder")
    folder.locator(".folder-menu summary").click()
    rename = folder.get_by_label("Folder name")
    rename.fill("Baking")
    rename.press("Enter")
    folder = page.locator("section.folder").filter(has_text="Baking")
    expect(folder).to_be_visible()
    folder.locator(".folder-menu summary").click()
    page.once("dialog", lambda dialog: dialog.accept())
    folder.get_by_role("button", name="Delete folder").click()
    expect(page.locator("section.folder")).to_have_count(0)
    expect(entry(page, "topic 3")).to_be_visible()


def test_select_mode_archives_and_deletes_several(page: Any, server_url: str, size: str) -> None:
    nav = sidebar(page)
    select = nav.get_by_role("button", name="Select", exact=True)
    select.click()
    expect(select).to_have_attribute("aria-pressed", "true")
    bar = page.locator("#bulk-bar")
    expect(bar.get_by_text("None selected")).to_be_visible()
    expect(bar.get_by_role("button", name="Archive")).to_be_disabled()
    page.get_by_label("Select “topic 1”").check()
    entry(page, "topic 2").get_by_role("link").click()  # a tap on an entry checks it
    expect(page.get_by_label("Select “topic 2”")).to_be_checked()
    expect(bar.get_by_text("2 selected")).to_be_visible()
    screenshots(page, "organise-select", lambda p: sidebar(p))
    sidebar(page)
    bar.get_by_role("button", name="Archive").click()
    expect(entry(page, "topic 1")).to_have_count(0)
    expect(entry(page, "topic 2")).to_have_count(0)
    expect(bar).to_be_hidden()  # done once it acted
    expect(page.get_by_role("link", name="Archived (2)")).to_be_visible()

    select.click()
    page.get_by_label("Select “topic 3”").check()
    page.get_by_label("Select “topic 4”").check()
    page.once("dialog", lambda dialog: dialog.accept())
    bar.get_by_role("button", name="Delete").click()
    expect(entry(page, "topic 3")).to_have_count(0)
    expect(entry(page, "topic 4")).to_have_count(0)
    assert listed(page) == ["topic 5"]


def test_an_export_is_imported_and_marked(page: Any, server_url: str, size: str) -> None:
    sidebar(page).get_by_role("link", name="Import", exact=True).click()
    expect(page.get_by_role("heading", name="Import conversations")).to_be_visible()
    # The ZIP ChatGPT mails, as it is.
    mailed = io.BytesIO()
    with zipfile.ZipFile(mailed, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("chat.html", "<html>the same, as a page</html>")
        archive.write(FIXTURES / "chatgpt_conversations.json", "conversations.json")
    page.get_by_label("Export file (ZIP or JSON)").set_input_files(
        files=[{"name": "export.zip", "mimeType": "application/zip", "buffer": mailed.getvalue()}]
    )
    screenshots(page, "organise-import")
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.get_by_role("status")).to_contain_text("Imported 2 conversations (9 messages)")
    # A file that is not an export: refused, in words.
    page.get_by_label("Export file (ZIP or JSON)").set_input_files(
        files=[
            {
                "name": "x.json",
                "mimeType": "application/json",
                "buffer": json.dumps({"a": 1}).encode(),
            }
        ]
    )
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.get_by_role("alert")).to_contain_text("in no format this app reads")

    page.goto(f"{server_url}/")
    sidebar(page)
    item = entry(page, "Sourdough starter schedule")
    expect(item.locator(".imported-mark")).to_have_text("imported")
    panel = menu_of(page, "Regex for ISO dates")
    expect(panel.get_by_text("No folders yet")).to_be_visible()  # its folder list, fetched
    screenshots(page, "organise-menu", lambda p: (sidebar(p), menu_of(p, "Regex for ISO dates")))
    sidebar(page)
    menu_of(page, "Regex for ISO dates").get_by_role("button", name="Pin").focus()
    page.keyboard.press("Escape")  # the menu closes
    expect(page.locator(".item-menu[open]")).to_have_count(0)
    item = entry(page, "Sourdough starter schedule")
    item.get_by_role("link").click()
    expect(page.locator(".imported-note")).to_contain_text("Imported from ChatGPT")
    expect(page.locator("article.assistant").last).to_contain_text("bake with it within the hour")
    expect(page.locator("article.assistant").last.locator(".meta")).to_have_text("gpt-4o")
    # The edited question's other version is one click away.
    expect(page.locator(".versions").first).to_contain_text("2 / 2")
    screenshots(page, "organise-imported")


def test_another_tab_of_the_user_sees_the_change_at_once(page: Any, server_url: str) -> None:
    other = page.context.new_page()
    other.set_viewport_size(page.viewport_size)
    other.goto(f"{server_url}/")
    expect(other.locator("#conversation-groups")).to_contain_text("topic 4")
    sidebar(page)
    menu_of(page, "topic 4").get_by_role("button", name="Pin", exact=True).click()
    expect(page.locator(".pinned-group")).to_contain_text("topic 4")
    # No reload: the socket's push has the other tab fetch its sidebar.
    expect(other.locator(".pinned-group")).to_contain_text("topic 4")
    menu_of(page, "topic 4").get_by_role("button", name="Archive", exact=True).click()
    expect(other.locator(".pinned-group")).to_have_count(0)
    expect(other.locator(".archived-link a")).to_have_text("Archived (1)")
    other.close()
