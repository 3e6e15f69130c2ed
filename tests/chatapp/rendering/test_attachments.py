"""An answer's media, kept from its Completion: only what a page can show safely is displayable."""

from __future__ import annotations

import base64
import io
import wave

import pytest

from chatapp.rendering.attachments import (
    audio_attachment,
    from_completion,
    image_url_attachment,
    playable_type,
    preview_url,
    safe_filename,
)
from gateway_client.accumulator import Accumulator
from gateway_client.events import Artifact, AudioOutput, ImageOutput


def test_only_raster_images_are_kept() -> None:
    acc = Accumulator()
    acc.add(ImageOutput(0, url="data:image/svg+xml;base64,PHN2Zz4="))
    acc.add(ImageOutput(1, url="javascript:alert(1)"))
    acc.add(ImageOutput(2, url="http://plain.example/a.png"))
    acc.add(ImageOutput(3, b64="iVBO", media_type="image/png", partial=True))
    acc.add(ImageOutput(4, b64="iVBO", media_type="image/png"))
    acc.add(ImageOutput(5, url="https://cdn.example/a.png"))
    acc.add(ImageOutput(6, url='data:image/png;base64,AA"><script>'))
    # An image stream's base64 images are judged by their bytes: "iVBO" is no whole PNG, so each
    # becomes a note (whole ones: test_image_previews.py).
    refused = "was not kept: it is not a PNG, JPEG, GIF or WebP image."
    assert from_completion(acc.completion) == [
        {"kind": "note", "text": f"Image 4 {refused}"},
        {"kind": "note", "text": f"Image 5 {refused}"},
        {"kind": "image_url", "url": "https://cdn.example/a.png"},
    ]
    assert image_url_attachment(ImageOutput(0, b64="PHN2Zz4=", media_type="image/svg+xml")) is None


def test_audio_pieces_become_one_playable_clip_and_files_keep_their_data() -> None:
    acc = Accumulator()
    acc.add(Artifact("file", "table.csv", "text/csv", base64.b64encode(b"a,b\n1,2\n").decode()))
    for piece, words in ((b"RIFF", "Hello "), (b"....WAVE", "there")):
        acc.add(AudioOutput(base64.b64encode(piece).decode(), words, "wav"))
    file, audio = from_completion(acc.completion)
    assert file["kind"] == "file"
    assert file["filename"] == "table.csv"
    assert base64.b64decode(file["data"]) == b"a,b\n1,2\n"
    assert audio["kind"] == "audio"
    assert audio["media_type"] == "audio/wav"
    assert base64.b64decode(audio["data"]) == b"RIFF....WAVE"
    assert audio["transcript"] == "Hello there"
    assert playable_type(audio) == "audio/wav"
    assert playable_type(file) is None
    assert from_completion(None) == []


def test_raw_pcm16_is_wrapped_as_wav() -> None:
    pcm = b"\x01\x00\xff\x7f" * 100
    audio = audio_attachment(AudioOutput(base64.b64encode(pcm).decode(), "", "pcm16"))
    with wave.open(io.BytesIO(base64.b64decode(audio["data"]))) as clip:
        assert clip.getframerate() == 24_000
        assert clip.readframes(1000) == pcm
    assert playable_type(audio) == "audio/wav"


def test_unknown_audio_formats_are_only_downloads() -> None:
    audio = audio_attachment(AudioOutput("AAAA", "hi", "x-weird"))
    assert audio["media_type"] == "application/octet-stream"
    assert playable_type(audio) is None


def test_image_files_get_a_raster_preview_only() -> None:
    png = {"kind": "file", "media_type": "image/png", "data": "iVBORw0KGgo="}
    svg = {"kind": "file", "media_type": "image/svg+xml", "data": "PHN2Zz4="}
    broken = {"kind": "file", "media_type": "image/png", "data": '"><script>alert(1)</script>'}
    assert preview_url(png) == "data:image/png;base64,iVBORw0KGgo="
    assert preview_url(svg) is None
    assert preview_url(broken) is None


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("report.csv", "report.csv"),
        ("../../etc/passwd", "passwd"),
        ("C:\\Windows\\evil.exe", "evil.exe"),
        (".bashrc", "bashrc"),
        ("a\r\nSet-Cookie: x=1.txt", "aSet-Cookie: x=1.txt"),
        ("invoice\u202egpj.exe", "invoicegpj.exe"),
        ("", "file"),
        (None, "file"),
        ("x" * 300, "x" * 120),
    ],
)
def test_download_names_are_plain(name: object, expected: str) -> None:
    assert safe_filename(name, "file") == expected
