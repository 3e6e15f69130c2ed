"""An MCP tool's result as the app keeps it: text for the model (and the pane, as text), and its
images and files as the answer's attachments, checked as generated ones are.

Everything in a result is untrusted: text is only ever shown as text (the pane sets
`textContent`), an image is kept only when its bytes are a raster type we serve
(`image_checks.checked_image`, never SVG), a resource's bytes become a download served inert
(`middleware.sandboxed`), and what the app does not take (audio) is named, not passed on.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Any

import orjson
from mcp import types

from chatapp.rendering.image_checks import ImageRefused, checked_image

__all__ = ["MAX_FILE_BYTES", "ToolResult", "read"]

MAX_FILE_BYTES = 5 * 1024 * 1024
"""The largest resource a result may attach; the byte cap of a session is larger."""

_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a call returned: `text` for the model, `failed` when the server said the tool
    failed (`isError`), and `attachments` as `Message.attachments` keeps them."""

    text: str
    failed: bool
    attachments: tuple[dict[str, Any], ...]


def read(result: types.CallToolResult, tool: str) -> ToolResult:
    """`result` of a call of `tool` (the server's name), read part by part."""
    parts: list[str] = []
    attachments: list[dict[str, Any]] = []
    for item in result.content:
        if isinstance(item, types.TextContent):
            parts.append(item.text)
        elif isinstance(item, types.ImageContent):
            parts.append(_image(item, tool, len(attachments) + 1, attachments))
        elif isinstance(item, types.EmbeddedResource):
            parts.append(_resource(item.resource, tool, len(attachments) + 1, attachments))
        elif isinstance(item, types.ResourceLink):
            parts.append(f"[A link to the resource {item.name!r}: {item.uri}]")
        else:
            parts.append(f"[A part of kind {item.type!r}, which this app does not take.]")
    if not parts and result.structuredContent is not None:
        parts.append(orjson.dumps(result.structuredContent).decode())
    text = "\n\n".join(parts) or "(The tool returned nothing.)"
    return ToolResult(text=text, failed=bool(result.isError), attachments=tuple(attachments))


def _image(
    item: types.ImageContent, tool: str, number: int, attachments: list[dict[str, Any]]
) -> str:
    try:
        image = checked_image(item.data)
    except ImageRefused as exc:
        return f"[An image the tool returned was not kept: it is {exc}.]"
    attachments.append(
        {
            "kind": "image",
            "media_type": image.media_type,
            "filename": f"{_SAFE_NAME.sub('-', tool)[:40]}-{number}.{image.extension}",
            "data": image.b64,
            "tool": tool[:64],  # the page says which tool returned it (autoescaped)
        }
    )
    return f"[An image ({image.media_type}, {image.size:,} bytes), shown to the user.]"


def _resource(
    resource: types.TextResourceContents | types.BlobResourceContents,
    tool: str,
    number: int,
    attachments: list[dict[str, Any]],
) -> str:
    if isinstance(resource, types.TextResourceContents):
        return f"[Resource {resource.uri}]\n{resource.text}"
    try:
        data = base64.b64decode(resource.blob, validate=True)
    except (binascii.Error, ValueError):
        return f"[The resource {resource.uri} was not kept: it is not valid base64.]"
    if len(data) > MAX_FILE_BYTES:
        return f"[The resource {resource.uri} was not kept: it is over {MAX_FILE_BYTES:,} bytes.]"
    tail = str(resource.uri).rstrip("/").rsplit("/", 1)[-1]
    filename = _SAFE_NAME.sub("-", tail)[:80].strip(".-") or f"{tool}-{number}"
    attachments.append(
        {
            "kind": "file",
            "artifact_type": "mcp_resource",
            "filename": filename,
            # Served as bytes to download whatever it says it is (the files view sandboxes it).
            "media_type": "application/octet-stream",
            "data": resource.blob,
        }
    )
    return f"[A file, {filename} ({len(data):,} bytes), attached for the user.]"
