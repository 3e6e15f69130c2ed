"""The ZIP ChatGPT mails as its data export, read for the one member the importer wants:
`conversations.json`.

A ZIP is read without trusting what it says about itself: the count of its members is checked
from its end record before Python's `zipfile` reads the central directory into objects, only the
member named `conversations.json` is opened, and at most the cap's bytes are unpacked from it
whatever its header says (a member 1,000 times smaller packed than unpacked is an ordinary bomb).
Every failure is `NotReadable`, with words for a person.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

__all__ = ["MAX_MEMBERS", "NotReadable", "conversations_json", "is_zip"]

MAX_MEMBERS = 50_000  # ChatGPT's export holds the JSON, a page and the images of the chats
_WANTED = "conversations.json"
_END_RECORD = b"PK\x05\x06"
_END_RECORD_SIZE = 22
_MAX_COMMENT = 65_535


class NotReadable(ValueError):
    """A ZIP the importer does not read, with the reason in words."""


def is_zip(data: bytes) -> bool:
    """Whether `data` starts like a ZIP (a local file header, or the end record of an empty one)."""
    return data.startswith((b"PK\x03\x04", _END_RECORD))


def conversations_json(data: bytes, cap: int) -> bytes:
    """The bytes of the ZIP's `conversations.json` (at its top, or in one folder), unpacked no
    further than `cap`; `NotReadable` saying why not."""
    _check_member_count(data)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            member = _member(archive)
            if member.file_size > cap:
                raise NotReadable(_too_big(cap))
            with archive.open(member) as file:
                unpacked = file.read(cap + 1)
    except NotReadable:
        raise
    except RuntimeError:  # zipfile's word for a member that needs a password
        raise NotReadable(
            "This ZIP is protected by a password: export again and upload the ZIP as mailed."
        ) from None
    except NotImplementedError:
        raise NotReadable(
            "This ZIP is packed in a way this app cannot unpack: unpack it and upload "
            "conversations.json."
        ) from None
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError):
        raise NotReadable(
            "This ZIP is damaged (it may not have downloaded completely): download the export "
            "again, or unpack it and upload conversations.json."
        ) from None
    if len(unpacked) > cap:
        raise NotReadable(_too_big(cap))
    return unpacked


def _check_member_count(data: bytes) -> None:
    start = data.rfind(_END_RECORD, max(0, len(data) - _END_RECORD_SIZE - _MAX_COMMENT))
    if start < 0 or len(data) < start + _END_RECORD_SIZE:
        raise NotReadable(
            "This ZIP is damaged (its end is missing; it may not have downloaded completely): "
            "download the export again."
        )
    (members,) = struct.unpack_from("<H", data, start + 10)  # 0xFFFF: a ZIP64 count, larger
    if members > MAX_MEMBERS:
        raise NotReadable(
            f"This ZIP holds over {MAX_MEMBERS:,} files; ChatGPT's export holds far fewer: "
            "unpack it and upload conversations.json."
        )


def _member(archive: zipfile.ZipFile) -> zipfile.ZipInfo:
    found = [
        info
        for info in archive.infolist()
        if not info.is_dir()
        and info.filename.rsplit("/", 1)[-1] == _WANTED
        and info.filename.count("/") <= 1
    ]
    if not found:
        raise NotReadable(
            "This ZIP holds no conversations.json: choose the ZIP ChatGPT mailed you as your "
            "data export."
        )
    return min(found, key=lambda info: info.filename.count("/"))  # the top one first


def _too_big(cap: int) -> str:
    return (
        f"The conversations.json in this ZIP is over {cap // (1024 * 1024):,} MB unpacked, "
        "the most one import takes."
    )
