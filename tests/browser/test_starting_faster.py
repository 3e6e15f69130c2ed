"""Starting faster (#41) in real Chromium, on a desktop and a 390 x 844 phone: an assistant
chosen in a new chat moves the picker to its model, fills the Settings and is what the gateway is
sent; a saved prompt typed as `/name` in the empty box, its variable asked for in a dialog; and a
temporary chat, which says what it is and is gone once its tab closes, its generation kept.

With `CHAT_SCREENSHOTS` set to a directory, the new-chat screen with an assistant chosen, the `/`
menu, the variables dialog and a temporary chat are saved there at both sizes.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.waiting import poll

from .conftest import manage_shell, screenshots, sign_in
from .test_answer_settings import finished, sent_with

pytestmark = [pytest.mark.browser]

SIZES = {"desktop": (1280, 900), "phone": (390, 844)}
PIRATE = "Answer as a pirate would."
NOTE = "Temporary chat: not saved; its cost is still recorded."


@pytest.fixture
def starters(server_env: dict[str, str]) -> Iterator[None]:
    """alice's assistant Pirate (emulator/echo, a system prompt, temperature 0.3) and two
    prompts, one with a variable; removed afterwards."""
    manage_shell(
        server_env,
        "from django.contrib.auth.models import User\n"
        "from chatapp.gateways.configs import config_for\n"
        "from chatapp.assistants.models import Assistant, Prompt\n"
        "alice = User.objects.get(username='alice')\n"
        f"Assistant.objects.create(owner=alice, name='Pirate', system_prompt={PIRATE!r},\n"
        "    temperature=0.3, gateway_id=config_for(None).pk, model='emulator/echo',\n"
        "    description='Talks like a pirate')\n"
        "Prompt.objects.create(owner=alice, name='translate',\n"
        "    text='Translate into {{language}}: Where is the harbour?')\n"
        "Prompt.objects.create(owner=alice, name='tldr', text='Summarize in one line.')\n",
    )
    yield
    manage_shell(
        server_env,
        "from chatapp.assistants.models import Assistant, Prompt\n"
        "Assistant.objects.all().delete(); Prompt.objects.all().delete()",
    )


def sized(page: Any, size: str) -> None:
    width, height = SIZES[size]
    page.set_viewport_size({"width": width, "height": height})
    page.reload()


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_an_assistant_chosen_in_a_new_chat_is_what_answers(
    alice: Any, received: list[dict[str, Any]], starters: None, size: str
) -> None:
    sized(alice, size)
    picker = alice.get_by_label("Model")
    option = alice.locator('#model option[value$=":emulator/chat"]').first
    picker.select_option(option.get_attribute("value"))
    box = alice.get_by_label("Message")
    box.fill("Where is the treasure?")
    alice.get_by_label("Assistant").select_option(label="Pirate")
    expect(picker).to_have_value(re.compile(r":emulator/echo$"))
    expect(alice.locator("#new-chat-applied")).to_have_text("System prompt · temperature 0.3")
    expect(box).to_have_value("Where is the treasure?")  # the draft stays
    if size == "desktop":  # saved at both sizes
        screenshots(alice, "assistant-new-chat")
    box.press("Enter")
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))
    finished(alice.locator("article.assistant").last)
    expect(alice.locator("header.chat-header .assistant-badge")).to_have_text("Assistant: Pirate")
    if size == "desktop":
        screenshots(alice, "assistant-conversation")
    body = sent_with(received, "Where is the treasure?")
    assert body["model"] == "emulator/echo"
    assert body["messages"][0] == {"role": "system", "content": PIRATE}
    assert body["temperature"] == 0.3


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_a_slash_prompt_is_inserted_with_its_variable_filled(
    alice: Any, starters: None, size: str
) -> None:
    sized(alice, size)
    box = alice.get_by_label("Message")
    box.click()
    expect(box).to_have_attribute("role", "combobox")
    expect(box).to_have_attribute("aria-expanded", "false")
    box.press_sequentially("/")
    menu = alice.get_by_role("listbox", name="Saved prompts")
    expect(menu.get_by_role("option")).to_have_count(2)
    expect(box).to_have_attribute("aria-expanded", "true")
    expect(alice.locator("#prompt-menu-status")).to_have_text(
        "2 prompts: up and down arrows to choose, Enter to insert"
    )
    if size == "desktop":  # saved at both sizes
        screenshots(alice, "prompt-menu")
    box.press_sequentially("t")
    # The arrows move the choice; Enter inserts it rather than sending "/t".
    chosen = menu.get_by_role("option", selected=True)
    expect(chosen).to_contain_text("/tldr")
    box.press("ArrowDown")
    expect(chosen).to_contain_text("/translate")
    box.press("ArrowDown")  # round to the first
    expect(chosen).to_contain_text("/tldr")
    box.press("ArrowUp")
    expect(chosen).to_contain_text("/translate")
    expect(box).to_have_attribute("aria-activedescendant", "prompt-option-1")
    box.press("Enter")
    dialog = alice.get_by_role("dialog", name="Fill in /translate")
    expect(dialog).to_be_visible()
    field = dialog.get_by_label("language")
    expect(field).to_be_focused()
    field.fill("French")
    if size == "desktop":  # saved at both sizes
        screenshots(alice, "prompt-variables")
    field.press("Enter")
    expect(dialog).to_have_count(0)
    expect(box).to_have_value("Translate into French: Where is the harbour?")
    expect(box).to_be_focused()
    expect(alice.locator("article.message")).to_have_count(0)  # nothing was sent

    # A prompt without variables goes straight in; Esc closes the menu and keeps what was typed.
    box.fill("")
    box.press_sequentially("/tl")
    box.press("Tab")  # moves on, as anywhere else, and the list closes
    expect(box).not_to_be_focused()
    expect(menu).to_be_hidden()
    expect(box).to_have_attribute("aria-expanded", "false")
    expect(box).to_have_value("/tl")
    box.fill("")
    box.press_sequentially("/tl")
    box.press("Enter")
    expect(box).to_have_value("Summarize in one line.")
    box.fill("")
    box.press_sequentially("/tr")
    expect(menu).to_be_visible()
    box.press("Escape")
    expect(menu).to_be_hidden()
    expect(box).to_have_value("/tr")


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_a_temporary_chat_is_gone_once_its_tab_closes_and_its_cost_stays(
    browser: Any, server_url: str, server_env: dict[str, str], size: str
) -> None:
    page = sign_in(browser, server_url, "alice")
    try:
        sized(page, size)
        note = page.locator("#temporary-note")
        expect(note).to_be_hidden()
        page.get_by_label("Temporary chat").check()
        expect(note).to_have_text(NOTE)
        expect(note).to_be_visible()
        if size == "desktop":
            screenshots(page, "temporary-new-chat")
        page.get_by_label("Model").select_option(
            page.locator('#model option[value$=":emulator/echo"]').first.get_attribute("value")
        )
        page.get_by_label("Message").fill("Forget me soon")
        page.get_by_label("Message").press("Enter")
        expect(page).to_have_url(re.compile(r"/c/\d+/$"))
        finished(page.locator("article.assistant").last)
        expect(page.locator("header.chat-header .temporary-badge")).to_have_text(NOTE)
        pk = int(re.findall(r"/c/(\d+)/$", page.url)[0])
        expect(page.locator(f"#conversation-item-{pk}")).to_have_count(0)
        if size == "desktop":  # saved at both sizes
            screenshots(page, "temporary-chat")
        page.locator("details.conversation-actions > summary").click()
        expect(page.get_by_role("button", name="Rename")).to_be_visible()
        expect(page.get_by_role("button", name="Create a share link")).to_have_count(0)
        if size == "desktop":  # it is not kept, so it offers no share link (#45)
            screenshots(page, "temporary-more")
        generations = manage_shell(
            server_env,
            "from chatapp.costs.models import Generation\n"
            f"print(*Generation.objects.filter(conversation_id={pk}).values_list('pk', "
            "flat=True))",
        ).split()
        assert generations, "its answer's generation"
    finally:
        page.context.close()  # the tab closes

    def gone() -> bool:
        code = (
            "from chatapp.conversations.models import Conversation as C; "
            f"print(C.objects.filter(pk={pk}))"
        )
        return manage_shell(server_env, code).strip() == "<QuerySet []>"

    poll(gone, what="the temporary chat to be deleted", within=30)
    kept = manage_shell(
        server_env,
        "from chatapp.costs.models import Generation\n"
        f"print(*Generation.objects.filter(pk__in={[int(g) for g in generations]!r})"
        ".values_list('conversation_id', 'status', 'user__username'))",
    ).strip()
    assert kept == "(None, 'completed', 'alice')", "its generation stays in the ledger"


def test_a_user_makes_an_assistant_and_a_prompt_in_settings(
    alice: Any, server_env: dict[str, str]
) -> None:
    try:
        alice.get_by_role("link", name="Assistants", exact=True).click()
        expect(alice.get_by_role("heading", name="Assistants")).to_be_visible()
        alice.get_by_role("link", name="New assistant").click()
        alice.get_by_label("Name").fill("Reviewer")
        alice.get_by_label("What it is for").fill("Reviews code, briefly")
        option = alice.locator('#settings-model option[value$=":emulator/echo"]').first
        alice.get_by_label("Model", exact=True).select_option(option.get_attribute("value"))
        alice.get_by_label("System prompt").fill("Review the code briefly.")
        alice.get_by_role("button", name="Save assistant").click()
        expect(alice.get_by_role("status")).to_have_text("Saved the assistant Reviewer.")
        expect(alice.locator(".starting-list")).to_contain_text("Reviews code, briefly")
        screenshots(alice, "assistants-page")
        alice.get_by_role("link", name="Start a chat").click()
        expect(alice.get_by_label("Assistant")).to_have_value(re.compile(r"^\d+$"))
        expect(alice.get_by_label("Model")).to_have_value(re.compile(r":emulator/echo$"))
        expect(alice.locator("#new-chat-applied")).to_have_text("System prompt")

        alice.get_by_role("link", name="Your prompts").click()
        alice.get_by_role("link", name="New prompt").click()
        alice.get_by_label("Name").fill("explain")
        alice.get_by_label("Text").fill("Explain {{topic}} to a child.")
        alice.get_by_role("button", name="Save prompt").click()
        expect(alice.get_by_role("status")).to_have_text("Saved the prompt /explain.")
        screenshots(alice, "prompts-page")
        alice.once("dialog", lambda dialog: dialog.accept())  # "Delete the prompt /explain?"
        alice.get_by_role("button", name="Delete /explain").click()
        expect(alice.get_by_role("status")).to_have_text("Deleted the prompt /explain.")
        expect(alice.get_by_text("None yet.")).to_be_visible()
    finally:
        manage_shell(
            server_env,
            "from chatapp.assistants.models import Assistant, Prompt\n"
            "Assistant.objects.all().delete(); Prompt.objects.all().delete()",
        )


@pytest.fixture
def two_variables(server_env: dict[str, str]) -> Iterator[None]:
    manage_shell(
        server_env,
        "from django.contrib.auth.models import User\n"
        "from chatapp.assistants.models import Prompt\n"
        "Prompt.objects.create(owner=User.objects.get(username='alice'), name='letter',\n"
        "    text='Write to {{person}} about:\\n{{points}}')\n",
    )
    yield
    manage_shell(
        server_env, "from chatapp.assistants.models import Prompt; Prompt.objects.all().delete()"
    )


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_a_prompts_variables_are_multi_line_and_none_is_left_blank_unasked(
    alice: Any, two_variables: None, size: str
) -> None:
    sized(alice, size)
    box = alice.get_by_label("Message")
    box.click()
    box.press_sequentially("/letter")
    box.press("Enter")
    dialog = alice.get_by_role("dialog", name="Fill in /letter")
    person = dialog.get_by_label("person")
    points = dialog.get_by_label("points")
    expect(person).to_be_focused()
    person.press_sequentially("Ann")
    person.press("Enter")  # to the next field, not inserted with the other blank
    expect(points).to_be_focused()
    expect(dialog).to_be_visible()
    points.press_sequentially("the rent")
    points.press("Shift+Enter")  # a new line in the field
    points.press_sequentially("the roof")
    expect(points).to_have_value("the rent\nthe roof")
    person.fill("")
    points.press("Enter")  # one is empty: said, and the focus goes to it
    expect(dialog).to_be_visible()
    expect(person).to_be_focused()
    expect(dialog.get_by_role("status")).to_have_text(
        "Empty: “person”. Fill it in, or press Insert again to leave it blank."
    )
    if size == "desktop":
        screenshots(alice, "prompt-variables-empty")
    person.press_sequentially("Ann")
    person.press("Enter")
    expect(points).to_be_focused()
    points.press("Enter")  # all filled: inserted
    expect(dialog).to_have_count(0)
    expect(box).to_have_value("Write to Ann about:\nthe rent\nthe roof")

    box.fill("")
    box.press_sequentially("/letter")
    box.press("Enter")
    dialog.get_by_role("button", name="Insert").click()
    expect(dialog.get_by_role("status")).to_contain_text("“person”, “points”")
    dialog.get_by_role("button", name="Insert").click()  # confirmed: left blank
    expect(box).to_have_value("Write to  about:\n")
