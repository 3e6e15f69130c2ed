"""Files attached to a message in real Chromium: an image and a PDF, by the Attach button and by
a paste into the box (an image by a drop on the composer too), reach the gateway (the emulator's
`vision` model answers about the parts it received) and stay with the user's message as a
thumbnail and a file chip; an image for a model that does not take images is said in the
composer and not sent; a file whose first bytes say it is none of the kinds taken (a program) is
refused as it is attached, saying why, with no chip.

Set `CHAT_SCREENSHOTS` to a directory to keep pictures of the composer and the sent message.
"""

from __future__ import annotations

import base64
import re
from typing import Any

import pytest
from playwright.sync_api import expect

from gateway_client.emulator.media import png_b64
from tests.pdf_bytes import pdf_bytes

from .conftest import choose_model, screenshots

pytestmark = [pytest.mark.browser]

PNG = base64.b64decode(png_b64("a small picture"))
# A Windows program's first bytes (its "MZ" header), then more than the browser reads of it.
EXE = b"MZ\x90\x00\x03\x00\x00\x00\x04\x00\x00\x00\xff\xff\x00\x00" + bytes(range(256)) * 300
PDF = pdf_bytes("Quarterly report of the lighthouse", "Second page of it")

PASTE = """([name, type, b64]) => {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const data = new DataTransfer();
  data.items.add(new File([bytes], name, { type }));
  const box = document.getElementById("message");
  box.focus();
  const paste = { clipboardData: data, bubbles: true, cancelable: true };
  box.dispatchEvent(new ClipboardEvent("paste", paste));
}"""


DROP = """([name, type, b64]) => {
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const data = new DataTransfer();
  data.items.add(new File([bytes], name, { type }));
  const box = document.getElementById("message");
  const drag = { dataTransfer: data, bubbles: true, cancelable: true };
  box.dispatchEvent(new DragEvent("dragover", drag));
  box.dispatchEvent(new DragEvent("drop", drag));
}"""


def paste(page: Any, name: str, media_type: str, data: bytes) -> None:
    page.evaluate(PASTE, [name, media_type, base64.b64encode(data).decode()])


def drop(page: Any, name: str, media_type: str, data: bytes) -> None:
    page.evaluate(DROP, [name, media_type, base64.b64encode(data).decode()])


def attach_by_button(page: Any, name: str, media_type: str, data: bytes) -> None:
    with page.expect_file_chooser() as chooser:
        page.get_by_role("button", name="Attach").click()
    chooser.value.set_files(files=[{"name": name, "mimeType": media_type, "buffer": data}])


HOW = {"button": attach_by_button, "paste": paste, "drop": drop}


def send_and_finish(page: Any, text: str) -> Any:
    page.get_by_label("Message").fill(text)
    page.get_by_label("Message").press("Enter")
    expect(page).to_have_url(re.compile(r"/c/\d+/$"))
    answer = page.locator("article.assistant").last
    expect(answer).to_have_attribute("data-status", "completed", timeout=30_000)
    return answer


def _composer_in_view(page: Any) -> None:
    page.locator("#composer").scroll_into_view_if_needed()


def _message_in_view(page: Any) -> None:
    page.locator("article.user").last.scroll_into_view_if_needed()


@pytest.mark.parametrize("how", ["button", "paste", "drop"])
def test_an_image_reaches_a_model_that_takes_images(alice: Any, how: str) -> None:
    choose_model(alice, "emulator/vision")
    HOW[how](alice, "picture.png", "image/png", PNG)
    chip = alice.locator("#composer .file-chips li")
    expect(chip).to_have_count(1)
    expect(chip).to_contain_text("picture.png")
    expect(chip.locator("img")).to_have_attribute("src", re.compile(r"^data:image/png;base64,"))
    if how == "button":
        screenshots(alice, "attach-composer-image", _composer_in_view)
    answer = send_and_finish(alice, "What is in this picture?")
    expect(answer.locator(".content")).to_contain_text(f"image, image/png, {len(PNG):,} bytes")
    expect(answer.locator(".content")).to_contain_text("2 parts, 1 of them image")
    thumbnail = alice.locator("article.user").last.locator(".uploads img")
    expect(thumbnail).to_have_attribute("alt", "picture.png")
    alice.wait_for_function(
        "(img) => img.complete && img.naturalWidth > 0", arg=thumbnail.element_handle()
    )
    expect(alice.locator("#composer .file-chips li")).to_have_count(0)  # sent with it
    if how == "button":
        screenshots(alice, "attach-sent-image", _message_in_view)


@pytest.mark.parametrize("how", ["button", "paste"])
def test_a_pdf_goes_as_its_text(alice: Any, how: str) -> None:
    choose_model(alice, "emulator/vision")
    HOW[how](alice, "report.pdf", "application/pdf", PDF)
    expect(alice.locator("#composer .file-chips li")).to_contain_text("report.pdf")
    answer = send_and_finish(alice, "Summarise the report")
    # The model was sent the PDF's text as a text part: the emulator quotes its first line.
    expect(answer.locator(".content")).to_contain_text("Attached file report.pdf (PDF, 2 pages")
    chip = alice.locator("article.user").last.locator(".uploads .upload-chip a")
    expect(chip).to_contain_text("report.pdf (PDF, 2 pages")
    href = chip.get_attribute("href")
    assert href is not None
    downloaded = alice.request.get(alice.url.split("/c/")[0] + href)
    assert downloaded.body() == PDF
    if how == "paste":
        screenshots(alice, "attach-sent-pdf", _message_in_view)


def test_an_image_for_a_model_without_image_input_is_said_and_not_sent(alice: Any) -> None:
    choose_model(alice, "emulator/chat")
    paste(alice, "picture.png", "image/png", PNG)
    note = alice.locator("#composer .attach-note")
    expect(note).to_contain_text("does not take images (picture.png)")
    alice.get_by_label("Message").fill("Look at this")
    alice.get_by_label("Message").press("Enter")
    expect(note).to_be_visible()
    expect(alice.locator("article.user")).to_have_count(0)  # nothing was sent
    screenshots(alice, "attach-refused-image", _composer_in_view)
    alice.get_by_role("button", name="Remove picture.png").click()
    expect(note).to_be_hidden()
    expect(alice.locator("#composer .file-chips li")).to_have_count(0)


def test_a_program_is_refused_as_it_is_attached_and_a_text_file_is_not(alice: Any) -> None:
    attach_by_button(alice, "setup.exe", "application/x-msdownload", EXE)
    note = alice.locator("#composer .attach-note")
    expect(note).to_have_text(
        "Not attached: setup.exe is not a PNG, JPEG, GIF or WebP image, a PDF, or a text file"
        " (UTF-8)."
    )
    chips = alice.locator("#composer .file-chips li")
    expect(chips).to_have_count(0)
    expect(alice.get_by_role("list", name="Files to send")).to_be_hidden()
    screenshots(alice, "attach-refused-program", _composer_in_view)
    # A text file still attaches, and the refusal goes.
    attach_by_button(alice, "notes.txt", "text/plain", "Shopping: pears, plums, café\n".encode())
    expect(chips).to_have_count(1)
    expect(chips).to_contain_text("notes.txt")
    expect(note).to_be_hidden()
