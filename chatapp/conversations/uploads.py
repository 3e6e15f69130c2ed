"""Files a user attaches to a message: checked, read, and turned into what the model is sent.

An image is one whose bytes say PNG, JPEG, GIF or WebP (`image_checks.sniffed_type`, as for
generated images: the name and the browser's type are not believed); it goes upstream as an
OpenAI-style `image_url` part holding a `data:` URL, to a model whose `/models` entry lists image
input (`catalog.takes_images`), and as a line saying it was not sent to any other. A document is
a PDF (`%PDF-`), whose text pypdf reads in a render pool process under its deadline
(`rendering/pdf_text.py`), or a UTF-8 text file (text, Markdown, code, CSV); it goes as a text
part, its text cut at `MAX_DOCUMENT_CHARS`, saying so. Anything else is refused in words.

Bounded at every step: `MAX_UPLOADS` files a message, each at most `MAX_UPLOAD_BYTES`, together
at most `MAX_MESSAGE_UPLOAD_BYTES`; a PDF's first `MAX_PDF_PAGES` pages. On later turns a
message's files go again with the context, documents as their text, and images while the
context's images, newest first, fit in `MAX_CONTEXT_IMAGE_BYTES` (older ones as a line saying
so), so a long conversation's requests stay within what a gateway accepts.
"""

from __future__ import annotations

import base64
import mimetypes
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol

from chatapp.access.body_limits import MAX_MESSAGE_UPLOAD_BYTES, size_words
from chatapp.conversations.models import Message, Upload
from chatapp.errors import ChatAppError
from chatapp.rendering import pool, pool_jobs
from chatapp.rendering.attachments import safe_filename
from chatapp.rendering.image_checks import sniffed_type
from chatapp.rendering.pdf_text import PdfText

MAX_UPLOADS: Final = 5
MAX_UPLOAD_BYTES: Final = 4 * 1024 * 1024
MAX_DOCUMENT_CHARS: Final = 100_000
MAX_PDF_PAGES: Final = 50
MAX_CONTEXT_IMAGE_BYTES: Final = 5 * 1024 * 1024
LIMITS_IN_WORDS: Final = (
    f"at most {MAX_UPLOADS} files, each up to {MAX_UPLOAD_BYTES // 2**20} MB and "
    f"{MAX_MESSAGE_UPLOAD_BYTES // 2**20} MB in all; a document's first "
    f"{MAX_DOCUMENT_CHARS:,} characters (a PDF's first {MAX_PDF_PAGES} pages) are sent"
)

IMAGE_NAMES: Final = {
    "image/png": "PNG",
    "image/jpeg": "JPEG",
    "image/gif": "GIF",
    "image/webp": "WebP",
}
_TEXT_TYPES: Final = {".md": "text/markdown", ".markdown": "text/markdown", ".csv": "text/csv"}
NOT_A_KIND: Final = "not a PNG, JPEG, GIF or WebP image, a PDF, or a text file (UTF-8)"


class UploadRefused(ChatAppError, ValueError):
    """A file that cannot be attached; the message says which and why, for the composer."""


class UploadLike(Protocol):
    """An upload as checked (`CheckedUpload`) or as stored (`models.Upload`)."""

    @property
    def kind(self) -> str: ...
    @property
    def filename(self) -> str: ...
    @property
    def media_type(self) -> str: ...
    @property
    def size(self) -> int: ...
    @property
    def text(self) -> str: ...
    @property
    def pages(self) -> int | None: ...
    @property
    def pages_read(self) -> int | None: ...
    @property
    def cut(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class CheckedUpload:
    """A file that passed: what `models.Upload` stores of it."""

    kind: str  # models.Upload.Kind
    filename: str
    media_type: str
    data: bytes
    text: str = ""
    pages: int | None = None
    pages_read: int | None = None
    cut: bool = False

    @property
    def size(self) -> int:
        return len(self.data)


def check_sizes(files: Sequence[tuple[str, int]]) -> None:
    """Refuse, before any is read, files (name, size) past the count or the size caps."""
    if len(files) > MAX_UPLOADS:
        raise UploadRefused(f"At most {MAX_UPLOADS} files can be attached to a message.")
    for name, size in files:
        if size > MAX_UPLOAD_BYTES:
            raise UploadRefused(
                f"{safe_filename(name, 'A file')} is {size_words(size)}: a file may be at most "
                f"{MAX_UPLOAD_BYTES // 2**20} MB."
            )
    if sum(size for _, size in files) > MAX_MESSAGE_UPLOAD_BYTES:
        raise UploadRefused(
            f"These files are {size_words(sum(size for _, size in files))} together: a message's "
            f"files may be at most {MAX_MESSAGE_UPLOAD_BYTES // 2**20} MB in all."
        )


async def checked_uploads(files: Sequence[tuple[str, bytes]]) -> list[CheckedUpload]:
    """The files (name, bytes) as they will be stored, in order; `UploadRefused` for the first
    that cannot be attached. A PDF is read in a render pool process, never on the loop."""
    check_sizes([(name, len(data)) for name, data in files])
    checked = []
    for index, (name, data) in enumerate(files, 1):
        filename = safe_filename(name, f"file-{index}")
        checked.append(await _checked(filename, data))
    return checked


def content_kind(data: bytes) -> Literal["image", "pdf", "text"] | None:
    """What a file's bytes say it is, whatever its name; None for what is refused. The composer
    reads a file's first bytes the same way (`contentKind` in attach_rules.js; both pass
    `tests/vectors/uploads/content_kinds.json`), so what is refused here is not attached there."""
    if sniffed_type(data) is not None:
        return "image"
    if data.startswith(b"%PDF-"):
        return "pdf"
    if b"\x00" in data:
        return None
    try:
        data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
    return "text"


async def _checked(filename: str, data: bytes) -> CheckedUpload:
    if not data:
        raise UploadRefused(f"{filename} is empty.")
    image_type = sniffed_type(data)
    if image_type is not None:
        return CheckedUpload("image", filename, image_type, data)
    kind = content_kind(data)
    if kind is None:
        raise UploadRefused(f"{filename} was not attached: it is {NOT_A_KIND}.")
    if kind == "pdf":
        read = await pool.run(pool_jobs.pdf_text, data, MAX_PDF_PAGES, MAX_DOCUMENT_CHARS)
        if isinstance(read, pool.Failure):
            why = "reading it took too long" if read.kind == "deadline" else "it could not be read"
            raise UploadRefused(f"{filename} was not attached: {why}.")
        if isinstance(read, str):
            raise UploadRefused(f"{filename} was not attached: {read}.")
        assert isinstance(read, PdfText)
        return CheckedUpload(
            "document",
            filename,
            "application/pdf",
            data,
            read.text,
            read.pages,
            read.pages_read,
            read.cut,
        )
    text = data.decode("utf-8-sig")
    return CheckedUpload(
        "document",
        filename,
        _text_type(filename),
        data,
        text[:MAX_DOCUMENT_CHARS],
        cut=len(text) > MAX_DOCUMENT_CHARS,
    )


def _text_type(filename: str) -> str:
    extension = "." + filename.rpartition(".")[2].lower() if "." in filename else ""
    guessed = _TEXT_TYPES.get(extension) or mimetypes.guess_type(filename)[0] or ""
    return guessed if guessed.startswith("text/") or guessed == "application/json" else "text/plain"


def described(upload: UploadLike) -> str:
    """One line saying what a file is: "photo.png (PNG image, 12.4 KB)", "report.pdf (PDF,
    3 pages, 80.2 KB)"."""
    if upload.kind == "image":
        what = f"{IMAGE_NAMES.get(upload.media_type, upload.media_type)} image"
    elif upload.media_type == "application/pdf":
        what = f"PDF, {upload.pages} page{'' if upload.pages == 1 else 's'}"
    else:
        what = upload.media_type
    return f"{upload.filename} ({what}, {size_words(upload.size)})"


def document_part(upload: UploadLike) -> dict[str, Any]:
    """A document as a text part: a line naming it, then its text, and what was left out."""
    text = f"Attached file {described(upload)}:\n\n{upload.text}"
    left_out = []
    if (
        upload.pages is not None
        and upload.pages_read is not None
        and upload.pages_read < upload.pages
    ):
        left_out.append(f"only its first {upload.pages_read} of {upload.pages} pages were read")
    if upload.cut:
        left_out.append(f"its text is cut at {MAX_DOCUMENT_CHARS:,} characters")
    if left_out:
        text += f"\n\n[The file is longer: {'; '.join(left_out)}.]"
    return {"type": "text", "text": text}


def image_part(upload: UploadLike, data: bytes) -> dict[str, Any]:
    url = f"data:{upload.media_type};base64,{base64.b64encode(data).decode('ascii')}"
    return {"type": "image_url", "image_url": {"url": url}}


def image_note(upload: UploadLike, why: str) -> dict[str, Any]:
    """An image left out of a request, in words the model reads in its place."""
    return {"type": "text", "text": f"[Attached image {described(upload)}, not sent: {why}.]"}


def context_images(uploads: Sequence[Upload], takes_images: bool) -> dict[int, bytes | str]:
    """For each image of `uploads` (a context's, oldest first, `data` deferred), by its key: its
    bytes to send again, or why it is not sent. Newest first while they fit in
    `MAX_CONTEXT_IMAGE_BYTES`; none to a model that does not take images."""
    images = [upload for upload in uploads if upload.kind == Upload.Kind.IMAGE]
    found: dict[int, bytes | str] = {}
    room = MAX_CONTEXT_IMAGE_BYTES
    for upload in reversed(images):
        if not takes_images:
            found[upload.pk] = "this model does not take images"
        elif upload.size <= room:
            room -= upload.size
            found[upload.pk] = b""
        else:
            found[upload.pk] = (
                f"the images a request carries again are limited to "
                f"{MAX_CONTEXT_IMAGE_BYTES // 2**20} MB, the newest first"
            )
    wanted = [pk for pk, sent in found.items() if isinstance(sent, bytes)]
    for pk, data in Upload.objects.filter(pk__in=wanted).values_list("pk", "data"):
        found[pk] = bytes(data)
    return found


def user_content(
    text: str, uploads: Sequence[Upload], images: Mapping[int, bytes | str]
) -> str | list[dict[str, Any]]:
    """A user message's `content`: its text alone when it has no files (as before files were
    attached), else its text and one part per file, in order. `images` holds, by the upload's
    key, an image's bytes to send or why it is not sent (`context_images`)."""
    if not uploads:
        return text
    parts: list[dict[str, Any]] = [{"type": "text", "text": text}]
    for upload in uploads:
        if upload.kind != Upload.Kind.IMAGE:
            parts.append(document_part(upload))
            continue
        sent = images.get(upload.pk, "it was not kept")
        parts.append(
            image_part(upload, sent) if isinstance(sent, bytes) else image_note(upload, sent)
        )
    return parts


def store(message: Message, uploads: Sequence[CheckedUpload]) -> None:
    """Keep `uploads` with the user's `message`, in order."""
    Upload.objects.bulk_create(
        Upload(
            message=message,
            position=position,
            kind=upload.kind,
            filename=upload.filename,
            media_type=upload.media_type,
            size=upload.size,
            data=upload.data,
            text=upload.text,
            pages=upload.pages,
            pages_read=upload.pages_read,
            cut=upload.cut,
        )
        for position, upload in enumerate(uploads)
    )


def copy_uploads(source: Message, message: Message) -> None:
    """Give `message` (a new version of `source`, an edit) the files of `source`."""
    rows = list(Upload.objects.filter(message=source).order_by("position"))
    for row in rows:
        row.pk = None
        row.message = message
    Upload.objects.bulk_create(rows)
