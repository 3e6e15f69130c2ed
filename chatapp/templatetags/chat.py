"""Template filters that turn stored answers into safe HTML and plain-words status lines."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.safestring import SafeString, mark_safe

from .. import attachments, presentation
from ..models import Generation
from ..rendering import citation, render_markdown, showable_image_url

register = template.Library()


@register.filter
def markdown(text: str) -> SafeString:
    return mark_safe(render_markdown(text))  # sanitized by nh3 in render_markdown


@register.filter
def error_text(generation: Generation) -> str:
    return presentation.error_text(generation)


@register.filter
def meta_items(generation: Generation) -> list[str]:
    return presentation.meta_items(generation)


@register.filter
def citation_url(annotation: dict[str, Any]) -> str | None:
    """The http(s) URL of a citation in any of the shapes gateways send, else None."""
    return citation(annotation)[0]


@register.filter
def citation_title(annotation: dict[str, Any]) -> str:
    return citation(annotation)[1]


@register.filter
def image_src(attachment: dict[str, Any]) -> str | None:
    url = attachment.get("url")
    return showable_image_url(url) if isinstance(url, str) else None


@register.filter
def preview_src(attachment: dict[str, Any]) -> str | None:
    return attachments.preview_url(attachment)


@register.filter
def playable(attachment: dict[str, Any]) -> bool:
    return attachments.playable_type(attachment) is not None


@register.filter
def download_name(attachment: dict[str, Any]) -> str:
    return attachments.safe_filename(attachment.get("filename"), "file")
