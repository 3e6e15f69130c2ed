"""Asking with documents (#48) in real Chromium, on a desktop and a 390 x 844 phone: `#` in the
message box offers alice's collection and its file (chosen by keyboard and by mouse), the chosen
ones show as chips that can be removed, the answer cites [1], and the [1] opens the passage (its
file, its heading, its text) in a dialog, by keyboard and by mouse.

With `CHAT_SCREENSHOTS` set to a directory, the `#` menu, the chips and an opened citation are
saved there at both sizes, and the passages listed under the answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import choose_model, manage_shell, screenshots

pytestmark = [pytest.mark.browser]

SIZES = {"desktop": (1280, 900), "phone": (390, 844)}
HANDBOOK = (
    "# Annual leave\n\nEvery employee receives twenty-eight days of paid annual leave per year. "
    "Unused days may be carried over until the end of March.\n\n"
    "# Parking\n\nThe car park beneath the building has forty spaces, assigned by seniority.\n"
)


@pytest.fixture(scope="module")
def handbook(server_env: dict[str, str]) -> Iterator[None]:
    """alice's collection Handbook with Handbook.md in it, indexed through the emulator's
    `/embeddings` (the gateway's embedding model set as an admin sets it), once for both sizes,
    alone (what another module left on the shared server goes first); removed afterwards."""
    manage_shell(
        server_env,
        "import asyncio\n"
        "from django.contrib.auth.models import User\n"
        "from chatapp.gateways import configs\n"
        "from chatapp.knowledge import ingest\n"
        "from chatapp.knowledge.files import add_file\n"
        "from chatapp.gateways.models import Gateway\n"
        "from chatapp.knowledge.models import Collection\n"
        "from gateway_client.emulator import EMBEDDING_MODEL\n"
        "_, pk = configs.configs(force=True)\n"
        "Gateway.objects.filter(pk=pk).update(embedding_model=EMBEDDING_MODEL)\n"
        "configs.forget_configs()\n"
        "alice = User.objects.get(username='alice')\n"
        "Collection.objects.all().delete()\n"
        "handbook = Collection.objects.create(owner=alice, name='Handbook')\n"
        f"file = add_file(handbook, 'Handbook.md', {HANDBOOK.encode()!r}, alice.pk)\n"
        "asyncio.run(ingest.index(file.pk))\n"
        "file.refresh_from_db()\n"
        "assert file.state == 'ready', (file.state, file.error)\n",
    )
    yield
    manage_shell(
        server_env,
        "from chatapp.knowledge.models import Collection\nCollection.objects.all().delete()",
    )


def sized(page: Any, size: str) -> None:
    width, height = SIZES[size]
    page.set_viewport_size({"width": width, "height": height})
    page.reload()


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_asked_with_hash_the_answer_cites_the_passage_which_opens(
    alice: Any, handbook: None, size: str
) -> None:
    sized(alice, size)
    choose_model(alice, "emulator/chat")
    box = alice.get_by_label("Message")
    menu = alice.get_by_role("listbox", name="Collections and files")
    chips = alice.get_by_role("list", name="Documents to draw on")

    # Keyboard: "#" and the start of a name lists the collection and its file; Enter adds one.
    box.press_sequentially("How many days of annual leave do I get? #hand")
    expect(menu).to_be_visible()
    options = menu.get_by_role("option")
    expect(options).to_have_count(2)
    expect(options.nth(0)).to_contain_text("#Handbook")
    expect(options.nth(0)).to_contain_text("collection, 1 file ready")
    expect(options.nth(1)).to_contain_text("#Handbook.md")
    expect(box).to_have_attribute("aria-controls", "knowledge-menu")
    expect(box).to_have_attribute("aria-activedescendant", "knowledge-option-0")
    if size == "desktop":
        screenshots(alice, "knowledge-menu")
    box.press("ArrowDown")
    expect(box).to_have_attribute("aria-activedescendant", "knowledge-option-1")
    box.press("ArrowUp")
    box.press("Enter")
    expect(menu).to_be_hidden()
    expect(box).to_have_value("How many days of annual leave do I get?")
    expect(chips.get_by_role("listitem")).to_have_count(1)
    expect(chips.get_by_role("listitem")).to_contain_text("#Handbook")

    # Mouse: the file, offered still (the collection is chosen already), then removed.
    box.press_sequentially(" #Hand")
    expect(menu.get_by_role("option")).to_have_count(1)
    menu.get_by_role("option", name=re.compile("Handbook.md")).click()
    expect(chips.get_by_role("listitem")).to_have_count(2)
    expect(box).to_be_focused()
    if size == "desktop":
        screenshots(alice, "knowledge-chips")
    chips.get_by_role("button", name="Remove #Handbook.md").click()
    expect(chips.get_by_role("listitem")).to_have_count(1)

    box.press("Enter")
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    answer = alice.locator("article.assistant").last
    expect(answer).to_have_attribute("data-status", "completed", timeout=30_000)
    expect(chips).to_be_hidden()  # sent with that message; the next starts with none
    expect(answer.locator(".passages-pane summary")).to_have_text(
        re.compile(r"^\d+ passages? from Handbook\.md$")
    )
    mark = answer.locator(".content.rendered a.passage-ref").first
    expect(mark).to_have_text("[1]")

    # Keyboard: the mark is a link; Enter opens the passage, Esc closes it and the focus returns.
    mark.focus()
    mark.press("Enter")
    dialog = alice.get_by_role("dialog")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("heading")).to_have_text("[1] Handbook.md, § Annual leave")
    expect(dialog).to_contain_text("twenty-eight days of paid annual leave")
    expect(dialog.get_by_role("button", name="Close")).to_be_focused()
    if size == "desktop":
        screenshots(alice, "knowledge-citation")
    alice.keyboard.press("Escape")
    expect(dialog).to_have_count(0)
    expect(mark).to_be_focused()

    # Mouse: a click opens it too, and Close closes it.
    mark.click()
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name="Close").click()
    expect(dialog).to_have_count(0)

    # Under the answer, what it drew on: each passage with its file and place.
    pane = answer.locator(".passages-pane")
    pane.locator("summary").click()
    expect(pane.locator("li.passage").first).to_contain_text("Handbook.md, § Annual leave")
    if size == "desktop":
        screenshots(alice, "knowledge-passages", lambda page: pane.scroll_into_view_if_needed())


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_an_assistants_collections_are_checkboxes_beside_their_names(
    alice: Any, server_url: str, handbook: None, size: str
) -> None:
    """Each collection a row as each tool is: its checkbox at the start of the line, its name
    beside it (Django's list alone drew the box centred on a line of its own, the name below)."""
    width, height = SIZES[size]
    alice.set_viewport_size({"width": width, "height": height})
    alice.goto(f"{server_url}/settings/assistants/new/")
    field = alice.get_by_role("group", name="Collections")
    box = field.get_by_role("checkbox", name="Handbook")
    label = field.locator("label", has_text="Handbook")
    expect(box).to_be_visible()
    box_at, label_at, field_at = box.bounding_box(), label.bounding_box(), field.bounding_box()
    assert box_at["x"] - field_at["x"] < 8  # at the start of the row
    assert label_at["height"] < 2 * box_at["height"] + 8  # one line: the name beside the box
    box.check()
    expect(box).to_be_checked()
    if size == "desktop":
        screenshots(alice, "assistant-collections", lambda page: field.scroll_into_view_if_needed())
