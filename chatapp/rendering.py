"""Model output → safe HTML. Model text is untrusted: this is the only place it becomes markup.

markdown-it-py renders with raw HTML disabled (so `<script>` arrives as text), then nh3 keeps a
small allow-list of tags and only absolute http(s) URLs, plus `data:image/*` raster images for
`<img>`. Links get `rel="noopener nofollow"` and open in a new tab.
"""

from __future__ import annotations

import re

import nh3
from markdown_it import MarkdownIt

_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
    ["table", "strikethrough"]
)

ALLOWED_TAGS = frozenset(
    {
        "p", "br", "hr", "strong", "em", "del", "s", "code", "pre", "blockquote",
        "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6", "a", "img",
        "table", "thead", "tbody", "tr", "th", "td",
    }
)  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title"},
    "ol": {"start"},
    "th": {"align"},
    "td": {"align"},
    "code": {"class"},
}
_SAFE_DATA_IMAGE = re.compile(r"^data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*$", re.I)
_CODE_CLASS = re.compile(r"^language-[\w+#.-]{1,40}$")


def safe_url(value: str, *, image: bool = False) -> str | None:
    lowered = value.strip().lower()
    if lowered.startswith(("http://", "https://")):
        return value.strip()
    if image and _SAFE_DATA_IMAGE.match(value.strip()):
        return value.strip()
    return None


def _filter(tag: str, attribute: str, value: str) -> str | None:
    if attribute == "href":
        return safe_url(value)
    if attribute == "src":
        return safe_url(value, image=tag == "img")
    if attribute == "class":
        return value if _CODE_CLASS.match(value) else None
    return value


def sanitize(html: str) -> str:
    cleaned = nh3.clean(
        html,
        tags=set(ALLOWED_TAGS),
        attributes={tag: set(attrs) for tag, attrs in ALLOWED_ATTRIBUTES.items()},
        attribute_filter=_filter,
        url_schemes={"http", "https", "data"},
        link_rel="noopener nofollow",
        set_tag_attribute_values={"a": {"target": "_blank"}},
        strip_comments=True,
    )
    return cleaned


def render_markdown(text: str) -> str:
    """Sanitized HTML for model-written markdown."""
    if not text:
        return ""
    return sanitize(_md.render(text))
