"""Real, small media files made from the prompt with the standard library only.

PNGs are built by hand (zlib + struct, truecolour, one IDAT) so chat image output and the Numes
image stream carry images any decoder accepts; WAVs come from the `wave` module, one short tone
per word of the input, so their length depends on the text and a player can actually play them.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import math
import struct
import wave
import zlib

__all__ = ["csv_bytes", "png_b64", "png_bytes", "png_data_url", "wav_bytes"]

SAMPLE_RATE = 8000
_TONE_S = 0.12
_GAP_S = 0.03


def _colour(seed: str) -> tuple[int, int, int]:
    digest = hashlib.sha256(seed.encode()).digest()
    return digest[0], digest[1], digest[2]


def _chunk(kind: bytes, payload: bytes) -> bytes:
    crc = zlib.crc32(kind + payload) & 0xFFFFFFFF
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", crc)


def png_bytes(seed: str, size: int = 32, *, blocky: bool = False) -> bytes:
    """A `size`x`size` RGB PNG: a diagonal gradient in a colour derived from `seed`.

    `blocky` renders coarse 8-pixel blocks, used for an image stream's partial preview.
    """
    red, green, blue = _colour(seed)
    rows = bytearray()
    for y in range(size):
        rows.append(0)  # filter type: none
        for x in range(size):
            px, py = (x // 8 * 8, y // 8 * 8) if blocky else (x, y)
            shade = (px + py) * 255 // max(1, 2 * (size - 1))
            rows += bytes(
                ((red + shade) % 256, (green + shade // 2) % 256, (blue + 255 - shade) % 256)
            )
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(bytes(rows), 9))
        + _chunk(b"IEND", b"")
    )


def png_b64(seed: str, size: int = 32, *, blocky: bool = False) -> str:
    return base64.b64encode(png_bytes(seed, size, blocky=blocky)).decode("ascii")


def png_data_url(seed: str, size: int = 32) -> str:
    return "data:image/png;base64," + png_b64(seed, size)


def wav_bytes(text: str) -> bytes:
    """A mono 16-bit 8 kHz WAV with one beep per word of `text` (at least one, at most 200)."""
    words = text.split()[:200] or ["beep"]
    frames = bytearray()
    gap = b"\x00\x00" * int(SAMPLE_RATE * _GAP_S)
    for word in words:
        pitch = 330 + (zlib.crc32(word.encode()) % 12) * 55
        count = int(SAMPLE_RATE * _TONE_S)
        for n in range(count):
            envelope = min(1.0, n / 80, (count - n) / 80)
            sample = int(12000 * envelope * math.sin(2 * math.pi * pitch * n / SAMPLE_RATE))
            frames += struct.pack("<h", sample)
        frames += gap
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(SAMPLE_RATE)
        out.writeframes(bytes(frames))
    return buffer.getvalue()


def csv_bytes(rows: list[list[str]]) -> bytes:
    """UTF-8 CSV with CRLF line ends (RFC 4180)."""
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerows(rows)
    return buffer.getvalue().encode()
