"""A new conversation's title appears, written by the gateway's title model after the first
answer, in the sidebar, the header and the tab, with no reload; a rename is kept."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import screenshots, send, serve, sign_in

pytestmark = [pytest.mark.browser]

QUESTION = "how do otters keep warm in cold rivers"
TITLE = "Otters keep warm cold rivers"  # emulator/title's: the question's content words


@pytest.fixture(scope="module")
def titled_url(server_env: dict[str, str]) -> Iterator[str]:
    """A server of its own with titles on, written by the emulator's title model (the shared
    server has them off, so that other tests' titles stay their first lines)."""
    env = {**server_env, "CHAT_TITLES": "1", "LLM_TITLE_MODEL": "emulator/title"}
    with serve(env, "daphne-titles.log") as url:
        yield url


@pytest.fixture
def page(browser: Any, titled_url: str) -> Iterator[Any]:
    page = sign_in(browser, titled_url, "alice")
    yield page
    page.context.close()


@pytest.mark.paced  # the question stands as the title until the model's arrives
def test_a_title_appears_after_the_first_answer(page: Any) -> None:
    answer = send(page, QUESTION, "emulator/echo")
    expect(page).to_have_url(re.compile(r"/c/\d+/$"))
    pk = re.search(r"/c/(\d+)/", page.url).group(1)  # type: ignore[union-attr]
    link = page.locator(f"#conversation-link-{pk}")
    expect(link).to_have_text(QUESTION)  # its first line, at once
    expect(answer).to_have_attribute("data-status", "completed")
    expect(link).to_have_text(TITLE)  # then the model's
    expect(page.locator("#conversation-title")).to_have_text(TITLE)
    expect(page).to_have_title(f"{TITLE} · Gateway Chat")
    # The title is the conversation's spend too: its settled cost joins the header's total.
    expect(page.locator("#conversation-spend")).not_to_contain_text("without an amount")
    screenshots(page, "title")
    page.reload()
    expect(page.locator("#conversation-title")).to_have_text(TITLE)

    # A follow-up is not titled again, and the user's name for it stays.
    page.locator("details.conversation-actions > summary").click()
    page.get_by_label("Title", exact=True).fill("Otter notes")
    page.get_by_role("button", name="Rename", exact=True).click()
    expect(page.locator("#conversation-title")).to_have_text("Otter notes")
    follow_up = send(page, "and in summer", "emulator/echo")
    expect(follow_up).to_have_attribute("data-status", "completed")
    page.reload()
    expect(page.locator("#conversation-title")).to_have_text("Otter notes")
    expect(link).to_have_text("Otter notes")
