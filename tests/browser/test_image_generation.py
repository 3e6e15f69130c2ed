"""An image generation in Chromium against the paced emulator's Numes `/images`: the picker, the
previews replaced in place while it streams, the finals side by side from our origin with their
cost, one column on a phone, and Stop."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.waiting import poll

from .conftest import choose_model, finished, screenshots, send, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.paced]

PROMPT = "A lighthouse at dusk"
# Every picture an answer's image figures show, as it is set: which image, whether it is a
# preview, and which figure element shows it (numbered as first seen).
RECORD_PICTURES = """
window.pictures = [];
const figures = new Map();
const seen = (img) => {
  const figure = img.closest("figure.generated-image");
  if (!figure || !img.getAttribute("src")) return;
  if (!figures.has(figure)) figures.set(figure, figures.size);
  window.pictures.push({
    index: figure.dataset.index === undefined ? null : Number(figure.dataset.index),
    figure: figures.get(figure),
    inline: img.src.startsWith("data:image/png;base64,"),
    preview: figure.classList.contains("preview"),
    caption: figure.querySelector("figcaption")?.textContent || "",
  });
};
new MutationObserver((records) => {
  for (const record of records) {
    if (record.type === "attributes") seen(record.target);
    for (const node of record.addedNodes || []) {
      if (node.querySelectorAll) node.querySelectorAll("figure.generated-image img").forEach(seen);
    }
  }
}).observe(document.body, {
  subtree: true, childList: true, attributes: true, attributeFilter: ["src"],
});
"""


def final_images(answer: Any) -> Any:
    expect(answer).to_have_attribute("data-status", "completed", timeout=30_000)
    return answer.locator(".attachments figure.generated-image img")


def loaded_width(image: Any) -> int:
    image.scroll_into_view_if_needed()
    handle = image.element_handle()
    image.page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=handle)
    return int(image.evaluate("img => img.naturalWidth"))


def test_the_picker_offers_a_count_and_a_prompt_for_image_models(alice: Any) -> None:
    box = alice.get_by_label("Message")
    count = alice.get_by_label("Images")
    choose_model(alice, "emulator/chat")
    expect(count).to_be_hidden()
    chat_placeholder = box.get_attribute("placeholder")
    choose_model(alice, "emulator/image")
    expect(alice.locator("#model option:checked")).to_have_text(re.compile(r"· image"))
    expect(count).to_be_visible()
    expect(box).to_have_attribute("placeholder", "Describe an image…")
    choose_model(alice, "emulator/chat")
    expect(count).to_be_hidden()
    expect(box).to_have_attribute("placeholder", chat_placeholder or "")


def test_previews_give_way_to_the_final_images_side_by_side(
    alice: Any, paced_emulator: Any
) -> None:
    # In a conversation the page already watches, so that it sees every picture as it comes.
    # A new chat's page watches only once the conversation is swapped in, and catches up by a
    # snapshot, which holds each image's newest picture: on a busy machine, already the final.
    finished(alice, "warm up", "emulator/echo")
    alice.evaluate(RECORD_PICTURES)
    choose_model(alice, "emulator/image")
    alice.get_by_label("Images").select_option("2")
    answer = send(alice, PROMPT, "emulator/image")
    images = final_images(answer)
    expect(images).to_have_count(2)

    pictures = alice.evaluate("window.pictures")
    live = [p for p in pictures if p["inline"]]
    for index in (0, 1):
        shown = [p for p in live if p["index"] == index]
        assert shown, f"image {index + 1} streamed"
        assert shown[0]["preview"] is True
        assert shown[0]["caption"] == "Preview"
        assert len({p["figure"] for p in shown}) == 1, "each picture replaced the last in place"
        first_final = next((i for i, p in enumerate(shown) if not p["preview"]), len(shown))
        assert all(not p["preview"] for p in shown[first_final:]), "no preview after the final"

    record = paced_emulator.app.records.latest(endpoint="images")
    assert record is not None
    assert record.final_outcome == "completed"
    sources = [image.get_attribute("src") for image in images.all()]
    assert all(re.fullmatch(r"/m/\d+/attachments/[01]/", s or "") for s in sources), sources
    assert [loaded_width(image) for image in images.all()] == [32, 32]
    first, second = (image.bounding_box() for image in images.all())
    assert abs(first["y"] - second["y"]) < 1, "side by side"
    assert second["x"] > first["x"] + first["width"] - 1
    assert first["width"] >= 200, "drawn large, not at the emulator's 32 px"
    meta = answer.locator(".meta")
    expect(meta).to_contain_text("2 images")
    expect(meta).to_contain_text("$0.08")
    response = alice.request.get(alice.url.split("/c/")[0] + (sources[0] or ""))
    assert response.headers["content-type"] == "image/png"
    assert response.headers["x-content-type-options"] == "nosniff"

    alice.reload()  # stored: the same images, from our origin
    expect(
        alice.locator("article.assistant").last.locator("figure.generated-image img")
    ).to_have_count(2)


def test_the_count_chosen_stays_for_the_sends_that_follow(alice: Any) -> None:
    asked: list[str] = []
    alice.on(
        "request",
        lambda request: (
            asked.append(request.post_data or "")
            if request.method == "POST" and request.url.endswith("/send/")
            else None
        ),
    )
    choose_model(alice, "emulator/image")
    count = alice.get_by_label("Images")
    count.select_option("2")
    expect(final_images(send(alice, PROMPT, "emulator/image"))).to_have_count(2)
    expect(alice).to_have_url(re.compile(r"/c/\d+/$"))  # the new conversation swapped in
    expect(count).to_be_visible()
    expect(count).to_have_value("2")
    screenshots(alice, "image-count-kept")
    expect(final_images(send(alice, "A second lighthouse", "emulator/image"))).to_have_count(2)
    expect(count).to_have_value("2")
    assert len(asked) == 2
    assert all("images=2" in body.split("&") for body in asked), asked


def test_on_a_phone_the_images_are_one_column(browser: Any, server_url: str) -> None:
    page = sign_in(browser, server_url, "alice")
    try:
        page.set_viewport_size({"width": 390, "height": 844})
        choose_model(page, "emulator/image")
        page.get_by_label("Images").select_option("2")
        images = final_images(send(page, PROMPT, "emulator/image"))
        expect(images).to_have_count(2)
        first, second = (image.bounding_box() for image in images.all())
        assert abs(first["x"] - second["x"]) < 1
        assert second["y"] >= first["y"] + first["height"]
        assert first["x"] + first["width"] <= 390
    finally:
        page.context.close()


def test_stop_closes_the_image_stream_and_keeps_the_previews_marked(
    alice: Any, paced_emulator: Any
) -> None:
    choose_model(alice, "emulator/image")
    alice.get_by_label("Images").select_option("4")
    answer = send(alice, PROMPT, "emulator/image")
    expect(answer.locator("figure.generated-image.preview img").first).to_be_visible()
    records = paced_emulator.app.records
    record = poll(
        lambda: records.latest(endpoint="images", finished_at=None),
        what="the emulator to be streaming the images",
    )
    answer.get_by_role("button", name="Stop").click()
    expect(answer).to_have_attribute("data-status", "cancelled", timeout=5_000)
    record = records.wait_finished(record.id)
    assert record.final_outcome == "cancelled"
    assert record.cancelled_at is not None
    expect(answer).to_contain_text("Stopped.")
    # What arrived stays: finals, and any image stopped half-way as its marked preview.
    expect(answer.locator("figure.generated-image img").first).to_be_visible()
    for figure in answer.locator("figure.generated-image.unfinished").all():
        expect(figure).to_contain_text("Preview only: this image was not finished.")
