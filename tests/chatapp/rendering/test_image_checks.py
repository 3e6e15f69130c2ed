"""The checks a generated image passes: its type read from its bytes, its size capped."""

from __future__ import annotations

import base64

import pytest

from chatapp.rendering.image_checks import (
    MAX_PREVIEW_BYTES,
    CheckedImage,
    ImageRefused,
    checked_image,
    sniffed_type,
)
from gateway_client.emulator.media import png_bytes

JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + b"\x00" * 16
GIF = b"GIF89a" + b"\x00" * 16
WEBP = b"RIFF\x10\x00\x00\x00WEBPVP8 " + b"\x00" * 16
SVG = b'<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


@pytest.mark.parametrize(
    ("data", "media_type"),
    [
        (png_bytes("otters"), "image/png"),
        (JPEG, "image/jpeg"),
        (GIF, "image/gif"),
        (WEBP, "image/webp"),
        (SVG, None),
        (b"RIFF\x10\x00\x00\x00WAVEfmt ", None),
        (b"", None),
    ],
)
def test_the_type_is_read_from_the_magic_number(data: bytes, media_type: str | None) -> None:
    assert sniffed_type(data) == media_type


def test_a_raster_image_passes_with_its_sniffed_type_and_size() -> None:
    data = png_bytes("otters")
    image = checked_image(b64(data))
    assert image == CheckedImage("image/png", b64(data), len(data))
    assert image.extension == "png"
    assert image.data_url() == "data:image/png;base64," + b64(data)


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b64(SVG), "not a PNG, JPEG, GIF or WebP image"),
        ("iVBORw0KGgo!!!", "not valid base64"),
        (b64(b"\x89PNG\r\n\x1a\n" + b"\x00" * MAX_PREVIEW_BYTES), "larger than 1.5 MB"),
    ],
)
def test_anything_else_is_refused_with_a_reason(payload: str, reason: str) -> None:
    with pytest.raises(ImageRefused) as refused:
        checked_image(payload, MAX_PREVIEW_BYTES)
    assert str(refused.value) == reason


def test_an_oversized_image_is_judged_from_its_text_without_decoding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_decoding(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("decoded")

    monkeypatch.setattr(base64, "b64decode", no_decoding)
    with pytest.raises(ImageRefused, match="larger than 20 MB"):
        checked_image("A" * (28 * 1024 * 1024))


def test_exactly_at_the_cap_passes() -> None:
    data = b"\x89PNG\r\n\x1a\n" + b"\x00" * (MAX_PREVIEW_BYTES - 8)
    assert checked_image(b64(data), MAX_PREVIEW_BYTES).size == MAX_PREVIEW_BYTES
