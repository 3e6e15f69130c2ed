"""Feedback on an answer in real Chromium: a thumb, pressed and taken back, a comment that asks
itself after a thumbs down, all kept across a reload; on a desktop and on a phone."""

from __future__ import annotations

import json
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import finished, manage_shell, screenshots

pytestmark = [pytest.mark.browser]


def stored(env: dict[str, str], message_pk: str) -> list[list[str]]:
    """The feedback the server's database holds on the answer, as [rating, comment] pairs."""
    printed = manage_shell(
        env,
        "import json; from chatapp.costs.models import Feedback; "
        "print(json.dumps(list(Feedback.objects"
        f".filter(generation__message_id={int(message_pk)}).values_list('rating', 'comment'))))",
    )
    return json.loads(printed)


@pytest.mark.parametrize(
    "size",
    [{"width": 1280, "height": 900}, {"width": 390, "height": 844}],
    ids=["desktop", "phone"],
)
def test_a_thumb_and_a_comment_are_kept_and_changeable(
    alice: Any, server_env: dict[str, str], size: dict[str, int]
) -> None:
    alice.set_viewport_size(size)
    answer = finished(alice, "Otters hold hands while they sleep.")
    pk = answer.get_attribute("data-message")
    good = answer.get_by_role("button", name="Good answer")
    bad = answer.get_by_role("button", name="Bad answer")
    expect(good).to_have_attribute("aria-pressed", "false")
    expect(bad).to_have_attribute("aria-pressed", "false")

    regenerate = answer.get_by_role("button", name="Regenerate")
    row = [good.bounding_box(), regenerate.bounding_box()]
    good.click()
    expect(good).to_have_attribute("aria-pressed", "true")
    expect(answer.get_by_role("status")).to_have_text("Marked as a good answer.")
    # The row stays as it was: nothing in it moves when a thumb is pressed.
    assert [good.bounding_box(), regenerate.bounding_box()] == row

    # The footer at the bottom edge, as at the end of a long answer: the comment opens below it.
    answer.locator("footer").evaluate("el => el.scrollIntoView({block: 'end'})")
    bad.click()  # changed in place
    expect(bad).to_have_attribute("aria-pressed", "true")
    expect(good).to_have_attribute("aria-pressed", "false")
    comment = answer.get_by_label("What was wrong with it? (optional)")
    expect(comment).to_be_visible()  # a thumbs down asks why
    expect(comment).to_be_in_viewport(ratio=1)  # where it can be seen
    comment.fill("They hold paws, not hands.")
    screenshots(alice, "feedback", lambda page: answer.scroll_into_view_if_needed())
    answer.get_by_role("button", name="Save comment").click()
    expect(answer.get_by_role("status")).to_have_text("Comment saved.")
    expect(comment).to_be_hidden()  # folded once said
    assert stored(server_env, pk) == [["down", "They hold paws, not hands."]]

    alice.reload()
    answer = alice.locator(f"#message-{pk}")
    bad = answer.get_by_role("button", name="Bad answer")
    expect(bad).to_have_attribute("aria-pressed", "true")
    answer.get_by_text("Your comment").click()
    expect(answer.get_by_label("What was wrong with it? (optional)")).to_have_value(
        "They hold paws, not hands."
    )

    bad.click()  # pressed again: taken back
    expect(bad).to_have_attribute("aria-pressed", "false")
    expect(answer.get_by_role("status")).to_have_text("Rating removed.")
    assert stored(server_env, pk) == []


def test_the_admin_sees_what_the_disliked_answers_cost_per_model(
    alice: Any, server_url: str
) -> None:
    answer = finished(alice, "A short answer that was not liked.", "emulator/echo")
    answer.get_by_role("button", name="Bad answer").click()
    expect(answer.get_by_role("status")).to_have_text("Marked as a bad answer.")

    alice.goto(f"{server_url}/admin/chatapp/generation/summary/")
    alice.get_by_role("link", name="disliked").click()
    per_model = alice.locator("table", has=alice.get_by_role("columnheader", name="model"))
    expect(per_model.get_by_role("link", name="emulator/echo")).to_be_visible()
    assert "feedback=down" in alice.url
