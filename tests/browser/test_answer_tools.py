"""An answer's tools in real Chromium: Copy on a code block and on the whole answer (what lands on
the clipboard), the image lightbox, and a rich answer's layout on a desktop and on a phone.

Set `CHAT_SCREENSHOTS` to a directory to keep screenshots of that answer (light and dark,
1280x800 and 390x844), as the other browser tests do.
"""

from __future__ import annotations

import base64
import os
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from .conftest import finished
from .conftest import screenshots as shoot

pytestmark = [pytest.mark.browser]

CODE = (
    "def greet(name):\n"
    '    return f"Hello, {name}! " + "-" * 60  # a line longer than a desktop answer is wide,'
    " which scrolls sideways instead of wrapping"
)


def png_data_url(width: int, height: int) -> str:
    """A two-colour striped PNG (1 bit a pixel, a palette), tiny once compressed, so the echo
    streams it quickly."""
    stride = (width + 7) // 8
    rows = b"".join(
        b"\x00" + (b"\xff" if (y // 60) % 2 else b"\x00") * stride for y in range(height)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 1, 3, 0, 0, 0)
    palette = bytes([40, 120, 180, 230, 160, 60])
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"PLTE", palette)
    png += chunk(b"IDAT", zlib.compress(rows, 9)) + chunk(b"IEND", b"")
    return "data:image/png;base64," + base64.b64encode(png).decode()


RICH = f"""## Otters, briefly

```python
{CODE}
```

| Otter | Weight | Range |
|:------|-------:|:-----:|
| Sea otter | 45 kg | North Pacific |
| Giant otter | 32 kg | Amazon basin |

- [x] Hold hands while sleeping
- [ ] Use tools[^1]

![A striped picture]({png_data_url(640, 360)})

[^1]: Sea otters crack shells with stones.
"""


# Where each line of a code block starts on the screen.
LINE_STARTS = """code => {
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    const lefts = [];
    let atStart = true;
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        for (let i = 0; i < node.data.length; i++) {
            if (node.data[i] === "\\n") {
                atStart = true;
            } else if (atStart) {
                const range = document.createRange();
                range.setStart(node, i);
                range.setEnd(node, i + 1);
                lefts.push(range.getBoundingClientRect().left);
                atStart = false;
            }
        }
    }
    return lefts;
}"""


def with_clipboard(page: Any, server_url: str) -> Any:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server_url)
    return page


def clipboard(page: Any) -> str:
    return str(page.evaluate("navigator.clipboard.readText()"))


def test_copy_on_a_code_block_copies_its_code(alice: Any, server_url: str) -> None:
    with_clipboard(alice, server_url)
    answer = finished(
        alice, f"Two blocks:\n\n```python\n{CODE}\n```\n\n    second = 2\n", "emulator/echo"
    )
    blocks = answer.locator(".code-block")
    expect(blocks).to_have_count(2)
    expect(blocks.first.locator(".code-lang")).to_have_text("python")
    expect(blocks.nth(1).locator(".code-lang")).to_have_text("")
    button = blocks.first.locator("button.copy-code")  # its name changes: not found by name
    expect(button).to_have_accessible_name("Copy")
    button.click()
    expect(button).to_have_text("Copied")
    assert clipboard(alice) == CODE
    expect(button).to_have_text("Copy")  # back after a moment
    blocks.nth(1).locator("button.copy-code").click()
    expect(blocks.nth(1).locator("button.copy-code")).to_have_text("Copied")
    assert clipboard(alice) == "second = 2"


def test_copy_on_an_answer_copies_its_markdown(alice: Any, server_url: str) -> None:
    with_clipboard(alice, server_url)
    text = "# Heading\n\nSome **bold** text and `code`.\n\n- [ ] a task\n\nÜnïcode ✓"
    answer = finished(alice, text, "emulator/echo")
    button = answer.locator("button.copy-answer")
    expect(button).to_have_accessible_name("Copy the answer as Markdown")
    expect(button).to_have_text("Copy")
    button.click()
    expect(button).to_have_text("Copied")
    assert clipboard(alice).replace("\r\n", "\n") == text
    expect(button).to_have_accessible_name("Copied")
    expect(button).to_have_accessible_name("Copy the answer as Markdown")


def test_an_image_opens_in_a_lightbox_and_closes(alice: Any) -> None:
    answer = finished(alice, "A picture of otters", "emulator/image")
    image = answer.locator(".attachments img.image")
    image.click()
    dialog = alice.get_by_role("dialog", name="Image")
    expect(dialog).to_be_visible()
    big = dialog.locator("img")
    expect(big).to_have_attribute("src", image.evaluate("img => img.src"))
    # The generated image already fills half the answer's width (its grid cell).
    assert big.bounding_box()["width"] > image.bounding_box()["width"] * 2, "shown larger"
    alice.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(image).to_be_focused()
    # From the keyboard too; a click beside the picture, or Close, closes it.
    alice.keyboard.press("Enter")
    expect(dialog).to_be_visible()
    alice.mouse.click(5, 5)
    expect(dialog).to_be_hidden()
    expect(image).to_be_focused()
    image.click()
    dialog.get_by_role("button", name="Close").click()
    expect(dialog).to_be_hidden()
    expect(image).to_be_focused()


def check_layout(answer: Any, width: int) -> None:
    """The answer's parts in place at this screen width."""
    page = answer.page
    rendered = answer.locator(".content.rendered")
    picture = rendered.locator("img")
    box = picture.bounding_box()
    assert box["height"] <= 480.5
    assert box["width"] <= rendered.bounding_box()["width"] + 0.5
    # The page never scrolls sideways; the long code line scrolls inside its block.
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    pre = rendered.locator(".code-block pre")
    assert pre.evaluate("el => el.scrollWidth > el.clientWidth"), "the long line scrolls"
    lefts = rendered.locator(".code-block code").evaluate(LINE_STARTS)
    assert len(lefts) == 2
    assert abs(lefts[0] - lefts[1]) < 1, "the first line starts level with the others"


def screenshots(answer: Any, name: str) -> None:
    """With `CHAT_SCREENSHOTS` set: the screen, the whole answer and the picture in the lightbox."""
    shots = os.environ.get("CHAT_SCREENSHOTS")
    if not shots:
        return
    page = answer.page
    Path(shots).mkdir(parents=True, exist_ok=True)
    page.screenshot(path=f"{shots}/answer-{name}.png")
    size = page.viewport_size
    page.set_viewport_size({"width": size["width"], "height": 2400})  # all of it on one screen
    answer.screenshot(path=f"{shots}/answer-{name}-whole.png")
    page.set_viewport_size(size)
    answer.locator(".content.rendered img").click()
    expect(page.get_by_role("dialog", name="Image")).to_be_visible()
    page.screenshot(path=f"{shots}/lightbox-{name}.png")
    page.keyboard.press("Escape")
    expect(page.get_by_role("dialog", name="Image")).to_be_hidden()


def test_a_rich_answer_fits_a_desktop_and_a_phone(alice: Any) -> None:
    alice.set_viewport_size({"width": 1280, "height": 800})
    answer = finished(alice, RICH, "emulator/echo")
    rendered = answer.locator(".content.rendered")
    expect(rendered.locator("h2")).to_have_text("Otters, briefly")
    expect(rendered.locator(".code-block .code-lang")).to_have_text("python")
    expect(rendered.locator("td.align-right").first).to_have_text("45 kg")
    boxes = rendered.locator("input.task-list-item-checkbox")
    expect(boxes).to_have_count(2)
    expect(boxes.first).to_be_checked()
    expect(boxes.first).to_be_disabled()
    expect(boxes.nth(1)).not_to_be_checked()
    expect(rendered.locator("section.footnotes li")).to_contain_text("crack shells")
    picture = rendered.locator("img")
    expect(picture).to_have_count(1)
    alice.wait_for_function(
        "img => img.complete && img.naturalWidth > 0", arg=picture.element_handle()
    )
    # A footnote reference jumps within the page, not to a new tab.
    ref = rendered.locator("sup.footnote-ref a")
    assert ref.get_attribute("target") is None
    ref.click()
    expect(rendered.locator("section.footnotes li")).to_be_in_viewport()
    for width, height in [(1280, 800), (390, 844)]:
        alice.set_viewport_size({"width": width, "height": height})
        check_layout(answer, width)
        for scheme in ("light", "dark"):
            alice.emulate_media(color_scheme=scheme)
            answer.locator(".code-block").scroll_into_view_if_needed()
            screenshots(answer, f"{width}x{height}-{scheme}")


# --- Download and Copy in the lightbox -------------------------------------------------------

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

READ_CLIPBOARD_IMAGE = """async () => {
    const items = await navigator.clipboard.read();
    const item = items.find((each) => each.types.includes("image/png"));
    if (!item) return null;
    const blob = await item.getType("image/png");
    const bitmap = await createImageBitmap(blob);
    return [blob.type, bitmap.width, bitmap.height];
}"""


def open_lightbox(image: Any) -> Any:
    image.page.wait_for_function(
        "img => img.complete && img.naturalWidth > 0", arg=image.element_handle()
    )
    image.click()
    dialog = image.page.get_by_role("dialog", name="Image")
    expect(dialog).to_be_visible()
    return dialog


def test_download_saves_a_served_image_as_its_bytes(alice: Any, tmp_path: Path) -> None:
    answer = finished(alice, "A picture of otters", "emulator/image")
    image = answer.locator(".attachments img.image").first
    served = bytes(
        image.evaluate(
            "async img => [...new Uint8Array(await (await fetch(img.src)).arrayBuffer())]"
        )
    )
    assert served.startswith(PNG_SIGNATURE)
    dialog = open_lightbox(image)
    with alice.expect_download() as info:
        dialog.get_by_role("button", name="Download").click()
    download = info.value
    assert download.suggested_filename == "image-1.png"
    download.save_as(tmp_path / "saved.png")
    assert (tmp_path / "saved.png").read_bytes() == served
    expect(dialog.locator(".lightbox-note")).to_have_text("")


def test_download_saves_a_data_url_image_as_its_bytes(alice: Any, tmp_path: Path) -> None:
    url = png_data_url(64, 48)
    answer = finished(alice, f"![A striped picture]({url})", "emulator/echo")
    dialog = open_lightbox(answer.locator(".content.rendered img"))
    with alice.expect_download() as info:
        dialog.get_by_role("button", name="Download").click()
    download = info.value
    assert download.suggested_filename == "image-1.png"
    download.save_as(tmp_path / "saved.png")
    assert (tmp_path / "saved.png").read_bytes() == base64.b64decode(url.split(",", 1)[1])


def test_copy_puts_the_image_on_the_clipboard(alice: Any, server_url: str) -> None:
    with_clipboard(alice, server_url)
    alice.evaluate("navigator.clipboard.writeText('not the image')")
    answer = finished(alice, f"![A striped picture]({png_data_url(64, 48)})", "emulator/echo")
    dialog = open_lightbox(answer.locator(".content.rendered img"))
    copy = dialog.get_by_role("button", name="Copy")
    copy.click()
    expect(dialog.locator("button.lightbox-copy")).to_have_text("Copied")
    assert alice.evaluate(READ_CLIPBOARD_IMAGE) == ["image/png", 64, 48]
    # Closed and opened again at once (before "Copied" would go by itself): not pressed yet.
    alice.keyboard.press("Escape")
    open_lightbox(answer.locator(".content.rendered img"))
    assert dialog.locator("button.lightbox-copy").text_content() == "Copy"
    copy.click()
    expect(dialog.locator("button.lightbox-copy")).to_have_text("Copied")
    for scheme in ("light", "dark"):
        alice.emulate_media(color_scheme=scheme)
        shoot(alice, f"lightbox-tools-{scheme}")
    # A served image too (fetched from this server, not decoded here).
    alice.keyboard.press("Escape")
    answer = finished(alice, "A picture of otters", "emulator/image")
    image = answer.locator(".attachments img.image").first
    # Once it is decoded: the answer ends before its image has loaded.
    size = image.evaluate("img => img.decode().then(() => [img.naturalWidth, img.naturalHeight])")
    alice.evaluate("navigator.clipboard.writeText('not the image')")
    dialog = open_lightbox(image)
    copy = dialog.locator("button.lightbox-copy")
    copy.click()
    expect(copy).to_have_text("Copied")
    assert alice.evaluate(READ_CLIPBOARD_IMAGE) == ["image/png", *size]


def test_copy_says_so_where_the_browser_cannot_copy_images(alice: Any) -> None:
    alice.add_init_script("delete window.ClipboardItem")
    finished(alice, f"![A striped picture]({png_data_url(64, 48)})", "emulator/echo")
    alice.reload()  # the init script runs on the next page
    assert alice.evaluate("typeof ClipboardItem") == "undefined"
    dialog = open_lightbox(alice.locator("article.assistant .content.rendered img").last)
    dialog.locator("button.lightbox-copy").click()
    expect(dialog.locator("button.lightbox-copy")).to_have_text("Copy failed")
    expect(dialog.get_by_role("status")).to_have_text(
        "This browser cannot copy images: use Download."
    )
