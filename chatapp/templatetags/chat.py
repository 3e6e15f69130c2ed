"""Template filters that turn stored answers into safe HTML and plain-words status lines."""

from __future__ import annotations

from collections.abc import Mapping

from django import template
from django.utils.safestring import SafeString, mark_safe

from .. import attachments, presentation
from ..models import Generation
from ..rendering import linkable_url, render_markdown, showable_image_url

register = template.Library()


@register.filter
def markdown(text: str) -> SafeString:
    return mark_safe(render_markdown(text))  # sanitized by nh3 in render_markdown


@register.filter
def error_text(generation: Generation) -> str:
    return presentation.error_text(generation)


@register.filter
def warning_texts(generation: Generation) -> list[str]:
    return presentation.warning_texts(generation)


@register.filter
def meta_items(generation: Generation) -> list[str]:
    return presentation.meta_items(generation)


@register.filter
def link_href(url: object) -> str | None:
    """A stored citation URL, checked again at the page (defence in depth), else None."""
    return linkable_url(url) if isinstance(url, str) else None


@register.filter
def image_src(attachment: Mapping[str, object]) -> str | None:
    url = attachment.get("url")
    return showable_image_url(url) if isinstance(url, str) else None


@register.filter
def preview_src(attachment: Mapping[str, object]) -> str | None:
    return attachments.preview_url(attachment)


@register.filter
def playable(attachment: Mapping[str, object]) -> bool:
    return attachments.playable_type(attachment) is not None


@register.filter
def download_name(attachment: Mapping[str, object]) -> str:
    return attachments.safe_filename(attachment.get("filename"), "file")
