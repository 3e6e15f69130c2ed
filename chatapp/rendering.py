"""Model output → safe HTML. Model text is untrusted: this is the only place it becomes markup.

markdown-it-py renders with raw HTML disabled (so `<script>` arrives as text), then nh3 keeps a
small allow-list of tags; links keep only absolute http(s) URLs, markdown images only raster
`data:image/*` URLs (never SVG, which can carry script; a remote image becomes a link). Links
get `rel="noopener nofollow"` and open in a new tab. A citation's page form is made here too, so
the page and the live stream agree on it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

from gateway_client.events import Annotation

from .highlight import highlighted


def _highlight(code: str, language: str, attributes: str) -> str:
    return highlighted(code, language)


_md = MarkdownIt(
    "commonmark",
    {"html": False, "linkify": False, "typographer": False, "highlight": _highlight},
).enable(["table", "strikethrough"])


def _image_or_link(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    """A markdown image shows only when it is inline data; a remote one becomes a plain link,
    so model-written markdown cannot make the browser fetch a URL (and leak the conversation in
    it) without a click."""
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    if _SAFE_DATA_IMAGE.match(src):
        return str(renderer.image(tokens, idx, options, env))
    alt = renderer.renderInlineAsText(token.children or [], options, env)
    return f'<a href="{escapeHtml(src)}">{escapeHtml(alt or src)}</a>'


_md.add_render_rule("image", _image_or_link)


def _aligned_cell(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    """A table column's alignment as a class: markdown-it writes it as an inline `style`, which
    the sanitizer drops (and the CSP would block)."""
    token = tokens[idx]
    style = str(token.attrGet("style") or "")
    if style.startswith("text-align:"):
        token.attrs.pop("style", None)
        token.attrSet("class", "align-" + style.removeprefix("text-align:"))
    return str(renderer.renderToken(tokens, idx, options, env))


_md.add_render_rule("th_open", _aligned_cell)
_md.add_render_rule("td_open", _aligned_cell)

ALLOWED_TAGS = frozenset(
    {
        "p", "br", "hr", "strong", "em", "del", "s", "code", "pre", "blockquote",
        "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6", "a", "img",
        "table", "thead", "tbody", "tr", "th", "td", "span",
    }
)  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "img": {"src", "alt", "title"},
    "ol": {"start"},
    "th": {"class"},
    "td": {"class"},
    "code": {"class"},
    "span": {"class"},  # Pygments' token classes (`highlight.py`)
}
_SAFE_DATA_IMAGE = re.compile(r"^data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*$", re.I)
_CODE_CLASS = re.compile(r"^language-[\w+#.-]{1,40}$")
_TOKEN_CLASS = re.compile(r"^[a-z]{1,3}[0-9]?$")
_ALIGN_CLASS = re.compile(r"^align-(left|center|right)$")


def linkable_url(value: str) -> str | None:
    """`value` if a page may link to it (absolute http or https), else None."""
    value = value.strip()
    return value if value[:8].lower().startswith(("http://", "https://")) else None


def showable_image_url(value: str) -> str | None:
    """`value` if a page may show it as an image (https, or a raster `data:` URL), else None."""
    value = value.strip()
    if value[:8].lower().startswith("https://") or _SAFE_DATA_IMAGE.match(value):
        return value
    return None


def citation(annotation: Annotation) -> dict[str, str | None]:
    """What a page shows of a citation the stream reader checked: its URL (http(s), or None) and
    a title (the URL or "source" when the gateway gave none)."""
    return {"url": annotation.url, "title": annotation.title or annotation.url or "source"}


def _filter(tag: str, attribute: str, value: str) -> str | None:
    if attribute == "href":
        return linkable_url(value)
    if attribute == "src":
        return showable_image_url(value) if tag == "img" else None
    if attribute == "class":
        allowed = {"span": _TOKEN_CLASS, "th": _ALIGN_CLASS, "td": _ALIGN_CLASS}.get(
            tag, _CODE_CLASS
        )
        return value if allowed.match(value) else None
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
