"""An answer's media as kept on its `Message`, and the rules that make them safe to show.

Built once, from the stream's `Completion`, when the answer ends. Images that come as a URL are
kept (kind `image_url`) only when a page can show them without risk: raster `data:` URLs, or https
ones, which a page shows as a link (it loads no remote image; an SVG can carry script). An image
stream's images (base64, several megabytes each) are kept as bytes instead (kind `image`), once
`image_checks` has read their type from them, and served from our own origin like audio; one
refused becomes a note saying why, and a preview whose final never came is kept marked as a
preview. Audio is joined into one clip and served from our own origin by the attachment view, in
a format a player takes (raw `pcm16` is wrapped as WAV); files are kept as they came and only ever
served as downloads. They are written in the shapes below and read back as plain JSON, each field
checked before use. Nothing here knows Django.
"""

from __future__ import annotations

import base64
import binascii
import io
import unicodedata
import wave
from collections.abc import Mapping
from typing import Literal, TypedDict

from chatapp.rendering.image_checks import ImageRefused, checked_image, sniffed_type
from chatapp.rendering.markdown import showable_image_url
from gateway_client.accumulator import Completion
from gateway_client.events import Artifact, AudioOutput, ImageOutput

SAFE_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
# format -> (media type, file extension); what <audio> plays in every current browser.
AUDIO_FORMATS = {
    "wav": ("audio/wav", "wav"),
    "mp3": ("audio/mpeg", "mp3"),
    "flac": ("audio/flac", "flac"),
    "opus": ("audio/ogg", "ogg"),
    "ogg": ("audio/ogg", "ogg"),
    "aac": ("audio/aac", "aac"),
}
PLAYABLE_AUDIO_TYPES = frozenset(media_type for media_type, _ in AUDIO_FORMATS.values())
PCM16_RATE = 24_000  # OpenAI-style `pcm16`: 16-bit little-endian mono at 24 kHz
MAX_FILENAME = 120

type MediaKind = Literal["image", "audio", "file"]


class ImageUrlAttachment(TypedDict):
    """An image kept as the URL it came with: a raster `data:` URL, or an https one (a link)."""

    kind: Literal["image_url"]
    url: str


class AudioAttachment(TypedDict):
    kind: Literal["audio"]
    media_type: str
    filename: str
    data: str  # base64
    transcript: str


class FileAttachment(TypedDict):
    kind: Literal["file"]
    artifact_type: str
    filename: str
    media_type: str
    data: str  # base64


class GeneratedImageAttachment(TypedDict):
    """An image kept as bytes (an image stream's), served from our own origin."""

    kind: Literal["image"]
    media_type: str  # sniffed from the bytes
    filename: str
    data: str  # base64
    preview: bool  # the newest preview of an image whose final never arrived


class NoteAttachment(TypedDict):
    kind: Literal["note"]
    text: str


type Attachment = (
    ImageUrlAttachment
    | GeneratedImageAttachment
    | AudioAttachment
    | FileAttachment
    | NoteAttachment
)


def image_url_attachment(event: ImageOutput) -> ImageUrlAttachment | None:
    """A displayable image, or None for previews and anything that is not a raster image."""
    if event.partial:
        return None
    if event.url:
        url = event.url.strip()
        if url.startswith("data:"):
            media_type = url[5:].split(";", 1)[0].split(",", 1)[0].lower()
            if media_type not in SAFE_IMAGE_TYPES or showable_image_url(url) is None:
                return None
        elif not url.startswith("https://"):
            return None
        return {"kind": "image_url", "url": url}
    if event.b64 and (event.media_type or "").lower() in SAFE_IMAGE_TYPES:
        url = f"data:{event.media_type};base64,{event.b64}"
        return {"kind": "image_url", "url": url} if showable_image_url(url) else None
    return None


def generated_image_attachment(
    event: ImageOutput, b64: str
) -> GeneratedImageAttachment | NoteAttachment:
    """An image stream's image (`b64`, its base64) as stored, or the note that says why not."""
    number = event.index + 1
    try:
        image = checked_image(b64)
    except ImageRefused as exc:
        return {"kind": "note", "text": f"Image {number} was not kept: it is {exc}."}
    return {
        "kind": "image",
        "media_type": image.media_type,
        "filename": f"image-{number}.{image.extension}",
        "data": image.b64,
        "preview": event.partial,
    }


def _stored_image(event: ImageOutput) -> Attachment | None:
    if event.b64 is not None and event.url is None:
        return generated_image_attachment(event, event.b64)
    return image_url_attachment(event)


def audio_attachment(audio: AudioOutput) -> AudioAttachment:
    fmt = (audio.format or "").lower()
    data = audio.data
    if fmt == "pcm16" and data:
        data = base64.b64encode(_wav(base64.b64decode(data))).decode("ascii")
        fmt = "wav"
    media_type, extension = AUDIO_FORMATS.get(fmt, ("application/octet-stream", "bin"))
    return {
        "kind": "audio",
        "media_type": media_type,
        "filename": f"answer.{extension}",
        "data": data,
        "transcript": audio.transcript,
    }


def file_attachment(artifact: Artifact) -> FileAttachment:
    return {
        "kind": "file",
        "artifact_type": artifact.type,
        "filename": artifact.filename,
        "media_type": artifact.media_type,
        "data": artifact.data,
    }


def from_completion(completion: Completion | None) -> list[Attachment]:
    """What to persist of an answer's images, files and audio, in that order."""
    if completion is None:
        return []
    items: list[Attachment] = [a for a in map(_stored_image, completion.images) if a is not None]
    items += [file_attachment(artifact) for artifact in completion.artifacts]
    if completion.audio is not None:
        items.append(audio_attachment(completion.audio))
    return items


def decoded(item: Mapping[str, object]) -> bytes | None:
    """The bytes of a stored attachment, or None if it has none (images keep a URL instead)."""
    data = item.get("data")
    if not isinstance(data, str):
        return None
    try:
        return base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return None


def data_url(url: str) -> tuple[str, bytes | None] | None:
    """A `data:` URL's media type and bytes (None if they do not decode); None for any other
    URL."""
    if not url.startswith("data:"):
        return None
    header, _, payload = url[5:].partition(",")
    try:
        data = base64.b64decode(payload) if header.endswith(";base64") else payload.encode()
    except (binascii.Error, ValueError):
        data = None
    return header.split(";", 1)[0], data


def served_image_type(item: Mapping[str, object], data: bytes) -> str | None:
    """The type to serve a stored image's bytes (`data`) with, read from them again rather than
    from the stored label; None when it is not an image or not a raster type we serve."""
    return sniffed_type(data) if item.get("kind") == "image" else None


def playable_type(item: Mapping[str, object]) -> str | None:
    """The media type to serve an audio attachment with, if a player can take it."""
    media_type = item.get("media_type")
    if item.get("kind") == "audio" and item.get("data") and media_type in PLAYABLE_AUDIO_TYPES:
        return str(media_type)
    return None


def preview_url(item: Mapping[str, object]) -> str | None:
    """A `data:` URL to show an image file inline next to its download link, if it is raster."""
    media_type = str(item.get("media_type") or "").lower()
    data = item.get("data")
    if item.get("kind") != "file" or media_type not in SAFE_IMAGE_TYPES or not data:
        return None
    return showable_image_url(f"data:{media_type};base64,{data}")


def safe_filename(name: object, fallback: str) -> str:
    """A download name with no path, no control or bidi characters, no leading dot."""
    text = str(name or "").replace("\\", "/").rsplit("/", 1)[-1]
    text = "".join(ch for ch in text if unicodedata.category(ch)[0] != "C")
    text = text.strip().lstrip(".").strip()[:MAX_FILENAME]
    return text or fallback


def _wav(pcm: bytes) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(PCM16_RATE)
        out.writeframes(pcm[: len(pcm) // 2 * 2])
    return buffer.getvalue()
