"""Template filters that turn stored answers into safe HTML and plain-words status lines."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.safestring import SafeString, mark_safe

from .. import presentation
from ..models import Generation
from ..rendering import render_markdown, safe_url

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
    nested = annotation.get("url_citation")
    url = nested.get("url") if isinstance(nested, dict) else annotation.get("url")
    return safe_url(url) if isinstance(url, str) else None


@register.filter
def citation_title(annotation: dict[str, Any]) -> str:
    nested = annotation.get("url_citation")
    source = nested if isinstance(nested, dict) else annotation
    title = source.get("title") or source.get("url") or "source"
    return str(title)


@register.filter
def image_src(attachment: dict[str, Any]) -> str | None:
    url = attachment.get("url")
    return safe_url(url, image=True) if isinstance(url, str) else None
