"""The checks a generated image passes before a page shows it: its type read from its bytes, its
size capped.

An image stream says each image's `media_type`, but that is model output like the rest: the type
we serve is the one the magic number says (PNG, JPEG, GIF or WebP; never SVG, which can carry
script), so a mislabelled or hostile payload is refused rather than served under a label it does
not match. Previews travel through the channel layer to every watching browser, so they are
capped much lower than the finals we store and serve ourselves.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Final

from chatapp.errors import ChatAppError

MAX_IMAGE_BYTES: Final = 20 * 1024 * 1024
MAX_PREVIEW_BYTES: Final = 1_500_000
MAX_PREVIEW_IMAGES: Final = 10  # image indexes previewed (OpenAI's `n` goes up to 10)

_EXTENSIONS: Final = {
    "image/png": "png",
    "image/jpeg": "jpg",
    "image/gif": "gif",
    "image/webp": "webp",
}


class ImageRefused(ChatAppError):
    """A generated image that is not shown; the message says why, for the answer's note."""


@dataclass(frozen=True, slots=True)
class CheckedImage:
    """An image whose bytes are a raster type we serve: `b64` as received, `size` in bytes."""

    media_type: str
    b64: str
    size: int

    @property
    def extension(self) -> str:
        return _EXTENSIONS[self.media_type]

    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{self.b64}"


def sniffed_type(data: bytes) -> str | None:
    """The raster type `data` starts like, or None."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(data) >= 12 and data.startswith(b"RIFF") and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def checked_image(b64: str, max_bytes: int = MAX_IMAGE_BYTES) -> CheckedImage:
    """The image `b64` encodes, checked; `ImageRefused` when it is too large, not base64, or not
    a raster type we serve. The size is judged from the text first, so an oversized image is
    never decoded."""
    if len(b64) // 4 * 3 > max_bytes + 3:
        raise ImageRefused(f"larger than {_megabytes(max_bytes)}")
    try:
        data = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError):
        raise ImageRefused("not valid base64") from None
    if len(data) > max_bytes:
        raise ImageRefused(f"larger than {_megabytes(max_bytes)}")
    media_type = sniffed_type(data)
    if media_type is None:
        raise ImageRefused("not a PNG, JPEG, GIF or WebP image")
    return CheckedImage(media_type, b64, len(data))


def _megabytes(size: int) -> str:
    return f"{size / 1_000_000:g} MB" if size % (1024 * 1024) else f"{size // (1024 * 1024)} MB"
