"""Model output → safe HTML. Model text is untrusted: this is the only place it becomes markup.

markdown-it-py renders with raw HTML disabled (so `<script>` arrives as text), then nh3 keeps a
small allow-list of tags; links keep only absolute http(s) URLs (and a footnote's same-page
`#fn…` anchors), markdown images only raster `data:image/*` URLs (never SVG, which can carry
script; a remote image becomes a link). Links get `rel="noopener nofollow"`; web links open in a
new tab. A citation's page form is made here too, so the page and the live stream agree on it.
Formulas (`$…$`, `$$…$$`, `\\(…\\)`, `\\[…\\]`) become MathML (`math.py`), kept by the same
sanitizer with MathML's tags and a few of its attributes allowed.

Everything below is a render rule or a token rule of markdown-it, never a rewrite of its HTML,
and a pure function of the text, the citations and the `doc_id`, so a part of an answer renders
as it does within the whole (except a footnote whose reference and note are in different parts:
markdown-it links them only within one render). Code blocks get a language label and a Copy
button (`static/chatapp/answer_tools.js`), and a data attribute when the page draws them
(`mermaid`) or previews them (`html`, `svg`); task lists render as disabled checkboxes, the
sanitizer forcing `type="checkbox" disabled` (our rule, `_task_lists`: mdit-py-plugins' looked
back through the whole document for each item's list, so 12,500 items took 42 s); footnote ids
carry the `doc_id`, so two answers on one page do not share them. Blocks nested deeper than
markdown-it parses (its `maxNesting`, past which it drops the rest of the answer) are kept as
plain text under a note (`_too_deep`): text is never dropped.

Rendering runs only in the render pool's processes, under its deadline (`pool.py`); an
answer that runs out of it is shown by `plain_text_html`, marked, through the same sanitizer.
So is one whose HTML would pass `MAX_HTML_RATIO` times its text (and `HTML_ALLOWANCE`): the
final render is stored and sent with every view, and markup can multiply (5,000 references to one
footnote, each given a link back, made 50 times the text).
`RENDERER_VERSION` is kept with each stored render (`Message.html`): a change here that alters
output bumps it, and stored answers are rendered again as they are next shown.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml, unescapeAll
from markdown_it.renderer import RendererHTML
from markdown_it.rules_block.state_block import StateBlock
from markdown_it.rules_core import block, normalize
from markdown_it.rules_core.state_core import StateCore
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from mdit_py_plugins.footnote import footnote_plugin

from chatapp.rendering.highlight import highlighted
from chatapp.rendering.math import (
    MATH_ATTRIBUTES,
    MATH_BLOCK_CLASS,
    MATH_SOURCE_CLASS,
    MATH_TAGS,
    MATH_VALUE,
    math_plugin,
)
from gateway_client.events import Annotation

RENDERER_VERSION = 5


def _highlight(code: str, language: str, attributes: str) -> str:
    return highlighted(code, language)


_md = (
    MarkdownIt(
        "commonmark",
        {"html": False, "linkify": False, "typographer": False, "highlight": _highlight},
    )
    .enable(["table", "strikethrough"])
    .use(footnote_plugin, inline=False)
    .use(math_plugin)
)

_TASK_MARK = re.compile(r"\[[ xX]\][ \t\n\v\f\r]")
_LISTS = frozenset({"bullet_list_open", "ordered_list_open"})


def _task_lists(state: StateCore) -> None:
    """A list item whose paragraph starts `[ ] ` or `[x] ` gets a disabled checkbox, and its list
    the `contains-task-list` class, as GitHub renders them; one pass, each list found on a stack."""
    tokens = state.tokens
    lists: list[Token] = []
    for i, token in enumerate(tokens):
        if token.type in _LISTS:
            lists.append(token)
        elif token.type in ("bullet_list_close", "ordered_list_close") and lists:
            lists.pop()
        elif (
            token.type == "inline"
            and i >= 2
            and tokens[i - 1].type == "paragraph_open"
            and tokens[i - 2].type == "list_item_open"
            and _TASK_MARK.match(token.content)
            and token.children
        ):
            checked = ' checked="checked"' if token.content[1] in "xX" else ""
            box = Token("html_inline", "", 0)
            box.content = (
                f'<input class="task-list-item-checkbox"{checked} disabled="disabled" '
                'type="checkbox">'
            )
            token.children[0].content = token.children[0].content[3:]
            token.children.insert(0, box)
            token.content = token.content[3:]
            tokens[i - 2].attrSet("class", "task-list-item")
            if lists:
                lists[-1].attrSet("class", "contains-task-list")


_md.core.ruler.after("inline", "task_lists", _task_lists)

# A list opens two levels (the list, its item) before parsing what is inside, a quote one: a
# block from this level on could reach `maxNesting`, where markdown-it drops everything after.
MAX_DEPTH = _md.options["maxNesting"] - 2
TOO_DEEP_NOTE = "Nested too deep to format: shown as text."


def _too_deep(state: StateBlock, start: int, end: int, silent: bool) -> bool:
    """A block at `MAX_DEPTH`, and what follows it in its container, kept as its text."""
    if state.level < MAX_DEPTH:
        return False
    if silent:
        return True
    last = line = start
    while line < end:
        if not state.isEmpty(line):
            if state.sCount[line] < state.blkIndent:
                break  # the container has ended
            last = line
        line += 1
    token = state.push("too_deep", "", 0)
    token.block = True
    token.map = [start, last + 1]
    token.content = state.getLines(start, last + 1, state.blkIndent, False)
    state.line = last + 1
    return True


_md.block.ruler.before("table", "too_deep", _too_deep)


def _too_deep_text(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    return (
        f'<p class="render-fallback">{escapeHtml(TOO_DEEP_NOTE)}</p>\n'
        f'<pre class="plain-text"><code>{escapeHtml(tokens[idx].content)}</code></pre>\n'
    )


_md.add_render_rule("too_deep", _too_deep_text)


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
    target = ' target="_blank"' if linkable_url(src) else ""
    return f'<a href="{escapeHtml(src)}"{target}>{escapeHtml(alt or src)}</a>'


_md.add_render_rule("image", _image_or_link)


def _link_open(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    """A web link opens in a new tab; a same-page one (a footnote's) does not."""
    token = tokens[idx]
    if linkable_url(str(token.attrGet("href") or "")):
        token.attrSet("target", "_blank")
    return str(renderer.renderToken(tokens, idx, options, env))


_md.add_render_rule("link_open", _link_open)


def _code_block(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    """A code block under a head with its language (the model's word, escaped) and a Copy button.
    markdown-it's own rule writes the `<pre><code>`, so the first line starts right after
    `<code>`, level with the others. The `<pre>` is focusable and named: a long line scrolls it
    sideways, which a keyboard can do only once it has the focus (WCAG 2.1.1)."""
    token = tokens[idx]
    words = unescapeAll(token.info).split(maxsplit=1) if token.type == "fence" else []
    language = words[0] if words else ""
    default = renderer.fence if token.type == "fence" else renderer.code_block
    pre = str(default(tokens, idx, options, env)).removesuffix("\n")
    name = f"{language} code" if language else "Code"
    pre = pre.replace("<pre>", f'<pre tabindex="0" aria-label="{escapeHtml(name)}">', 1)
    return (
        f'<div class="code-block"{_code_view(language)}><div class="code-head">'
        f'<span class="code-lang">{escapeHtml(language)}</span>'
        '<button type="button" class="copy-code">Copy</button></div>'
        f"{pre}</div>\n"
    )


# What the page may show a block of these languages as, besides its code (`_code_view`).
DIAGRAM_LANGUAGES = {"mermaid": "mermaid"}
PREVIEW_LANGUAGES = {"html": "html", "svg": "svg"}


def _code_view(language: str) -> str:
    """The data attribute that asks the page to draw the block (`static/chatapp/diagrams.js`) or
    to offer its preview (`previews.js`): the hook is here, on the block the one renderer and
    sanitizer make, so a live block and the final render carry the same."""
    word = language.lower()
    if word in DIAGRAM_LANGUAGES:
        return f' data-diagram="{DIAGRAM_LANGUAGES[word]}"'
    if word in PREVIEW_LANGUAGES:
        return f' data-preview="{PREVIEW_LANGUAGES[word]}"'
    return ""


_md.add_render_rule("fence", _code_block)
_md.add_render_rule("code_block", _code_block)

_CITATION_MARK = re.compile(r"\[([1-9][0-9]{0,2})\]")


def _citation_refs(state: StateCore) -> None:
    """`[n]` in text, outside code and links, becomes a link to citation n when it has a web
    URL, or when it is a passage of the documents the answer drew on (`{"passage": n}`): a link
    to the passage shown under the answer (`passage_anchor`), which the page opens in place.
    Runs before `text_join`, so an escaped `\\[1]` stays text."""
    citations = state.env.get("citations") or ()
    if not citations:
        return
    for inline in state.tokens:
        if inline.type != "inline" or not inline.children:
            continue
        children: list[Token] = []
        in_link = 0
        for child in inline.children:
            in_link += {"link_open": 1, "link_close": -1}.get(child.type, 0)
            if child.type == "text" and not in_link and "[" in child.content:
                children += _linked_marks(state, child, citations)
            else:
                children.append(child)
        inline.children = children


def _linked_marks(
    state: StateCore, token: Token, citations: Sequence[Mapping[str, object]]
) -> list[Token]:
    parts: list[Token] = []
    done = 0
    for match in _CITATION_MARK.finditer(token.content):
        number = int(match[1])
        cited = citations[number - 1] if number <= len(citations) else {}
        url = cited.get("url")
        passage = cited.get("passage")
        if isinstance(passage, int):
            href, kind = "#" + passage_anchor(state.env.get("docId", ""), passage), "passage-ref"
        elif isinstance(url, str) and (web := linkable_url(url)) is not None:
            href, kind = state.md.normalizeLink(web), "citation-ref"
        else:
            continue
        title = cited.get("title")
        link = Token("link_open", "a", 1, level=token.level)
        link.attrs = {"href": href, "class": kind}
        link.attrs["title"] = title if isinstance(title, str) else href
        parts += [
            Token("text", "", 0, content=token.content[done : match.start()], level=token.level),
            link,
            Token("text", "", 0, content=match[0], level=token.level + 1),
            Token("link_close", "a", -1, level=token.level),
        ]
        done = match.end()
    if not parts:
        return [token]
    parts.append(Token("text", "", 0, content=token.content[done:], level=token.level))
    return [part for part in parts if part.type != "text" or part.content]


_md.core.ruler.before("text_join", "citation_refs", _citation_refs)


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
        "div", "button", "input", "sup", "section",
    }
) | MATH_TAGS  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title", "class", "id"},
    "p": {"class"},
    "pre": {"class", "aria-label"},
    "img": {"src", "alt", "title"},
    "ol": {"start", "class"},
    "ul": {"class"},
    "li": {"class", "id"},
    "th": {"class"},
    "td": {"class"},
    "code": {"class"},
    "span": {"class"},  # Pygments' token classes (`highlight.py`)
    "div": {"class"},
    "button": {"class"},
    "input": {"class"},
    "sup": {"class"},
    "section": {"class"},
    "hr": {"class"},
} | {tag: set(attributes) for tag, attributes in MATH_ATTRIBUTES.items()}
# Attributes kept only with one of these values, and ones set on every such tag whatever it said:
# a button cannot submit a form, nor a checkbox be ticked or typed into.
_ALLOWED_VALUES = {
    "a": {"target": {"_blank"}},
    "pre": {"tabindex": {"0"}},
    "div": {
        "data-diagram": set(DIAGRAM_LANGUAGES.values()),
        "data-preview": set(PREVIEW_LANGUAGES.values()),
    },
    "input": {"type": {"checkbox"}, "checked": {"checked", ""}, "disabled": {"disabled", ""}},
}
_FORCED_VALUES = {
    "button": {"type": "button"},
    "input": {"type": "checkbox", "disabled": "disabled"},
}
_CLASSES = {  # besides the patterns below
    "span": {"code-lang"},
    "p": {"render-fallback"},
    "pre": {"plain-text"},
    "a": {"citation-ref", "passage-ref", "footnote-backref"},
    "ol": {"footnotes-list"},
    "ul": {"contains-task-list"},
    "li": {"footnote-item", "task-list-item"},
    "div": {"code-block", "code-head", MATH_BLOCK_CLASS},
    "code": {MATH_SOURCE_CLASS},
    "button": {"copy-code", "copy-answer"},
    "input": {"task-list-item-checkbox"},
    "sup": {"footnote-ref"},
    "section": {"footnotes"},
    "hr": {"footnotes-sep"},
}
_SAFE_DATA_IMAGE = re.compile(r"^data:image/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]*$", re.I)
_CODE_CLASS = re.compile(r"^language-[\w+#.-]{1,40}$")
_TOKEN_CLASS = re.compile(r"^[a-z]{1,3}[0-9]?$")
_ALIGN_CLASS = re.compile(r"^align-(left|center|right)$")
_CLASS_PATTERNS = {
    "span": _TOKEN_CLASS,
    "th": _ALIGN_CLASS,
    "td": _ALIGN_CLASS,
    "code": _CODE_CLASS,
}
# A footnote's number (`:k` for its k-th reference), after the `doc_id` prefix if any.
_NOTE_NUMBER = r"(-[A-Za-z0-9]{1,32}-)?[0-9]{1,4}(:[0-9]{1,4})?"
_NOTE_ID = {"li": re.compile(f"fn{_NOTE_NUMBER}"), "a": re.compile(f"fnref{_NOTE_NUMBER}")}
_NOTE_HREF = re.compile(f"#fn(ref)?{_NOTE_NUMBER}")
_PASSAGE_HREF = re.compile(r"#passage-([A-Za-z0-9]{1,32}-)?[0-9]{1,3}")
_DOC_ID = re.compile(r"[A-Za-z0-9]{1,32}")


def passage_anchor(doc_id: str, number: int) -> str:
    """The id of passage `number` of the answer `doc_id` (`doc_id_for`) where its page shows it
    (`_message.html`), which its `[n]` links to."""
    return f"passage-{doc_id}-{number}" if doc_id else f"passage-{number}"


def linkable_url(value: str) -> str | None:
    """`value` if a page may link to it (absolute http or https), else None."""
    value = value.strip()
    return value if value[:8].lower().startswith(("http://", "https://")) else None


def showable_image_url(value: str) -> str | None:
    """`value` if a page may show it as an image (a raster `data:` URL), else None. A remote
    image is never loaded (the CSP's `img-src` has no `https:`): fetching it would tell its host
    that the answer was read, and from where; pages show it as a link instead."""
    value = value.strip()
    return value if _SAFE_DATA_IMAGE.match(value) else None


def citation(annotation: Annotation) -> dict[str, str | None]:
    """What a page shows of a citation the stream reader checked: its URL (http(s), or None) and
    a title (the URL or "source" when the gateway gave none)."""
    return {"url": annotation.url, "title": annotation.title or annotation.url or "source"}


def _filter(tag: str, attribute: str, value: str) -> str | None:
    if tag in MATH_TAGS:
        return value if MATH_VALUE.fullmatch(value) else None
    if attribute == "href":
        same_page = _NOTE_HREF.fullmatch(value) or _PASSAGE_HREF.fullmatch(value)
        return value if same_page else linkable_url(value)
    if attribute == "src":
        return showable_image_url(value) if tag == "img" else None
    if attribute == "id":
        pattern = _NOTE_ID.get(tag)
        return value if pattern and pattern.fullmatch(value) else None
    if attribute == "class":
        pattern = _CLASS_PATTERNS.get(tag)
        allowed = value in _CLASSES.get(tag, ()) or (pattern and pattern.match(value))
        return value if allowed else None
    return value


def sanitize(html: str) -> str:
    cleaned = nh3.clean(
        html,
        tags=set(ALLOWED_TAGS),
        attributes={tag: set(attrs) for tag, attrs in ALLOWED_ATTRIBUTES.items()},
        attribute_filter=_filter,
        url_schemes={"http", "https", "data"},
        tag_attribute_values={
            tag: {name: set(values) for name, values in attrs.items()}
            for tag, attrs in _ALLOWED_VALUES.items()
        },
        set_tag_attribute_values={tag: dict(attrs) for tag, attrs in _FORCED_VALUES.items()},
        link_rel="noopener nofollow",
        strip_comments=True,
    )
    return cleaned


def render_markdown(
    text: str, citations: Sequence[Mapping[str, object]] | None = None, *, doc_id: str = ""
) -> str:
    """Sanitized HTML for model-written markdown. `[n]` links to `citations[n - 1]` (as
    `citation()` gives them); `doc_id` (letters and digits, e.g. `doc_id_for(message.pk)`)
    prefixes footnote ids, so each answer's are its own."""
    if not text:
        return ""
    env: dict[str, object] = {"citations": citations or ()}
    if doc_id:
        if not _DOC_ID.fullmatch(doc_id):
            raise ValueError(f"doc_id must be 1 to 32 letters or digits, not {doc_id!r}")
        env["docId"] = doc_id
    html = sanitize(_md.render(text, env))
    if len(html) > MAX_HTML_RATIO * len(text) + HTML_ALLOWANCE:
        return plain_text_html(text, "too_large")
    return html


# Characters of HTML per character of text: highlighted code makes about 10 and a task list of
# one-word items about 14; footnote back-references, 30 to 50.
MAX_HTML_RATIO = 16
HTML_ALLOWANCE = 16_384  # characters, so that a short answer's markup is never counted against it

PLAIN_TEXT_NOTES = {
    "deadline": "Shown as plain text: it took too long to format.",
    "crashed": "Shown as plain text: it could not be formatted.",
    "busy": "Shown as plain text: the server was too busy to format it.",
    "pending": "Shown as plain text while it is formatted: reload to see it formatted.",
    "too_large": "Shown as plain text: formatted, it would be too large to keep.",
    "streaming": "Shown as plain text while the answer streams: too large to send formatted.",
}


def plain_text_html(text: str, why: str) -> str:
    """`text` escaped, as a block of plain text under a note saying why (a `PLAIN_TEXT_NOTES`
    key): what shows when the renderer gave no result."""
    if not text:
        return ""
    note = PLAIN_TEXT_NOTES.get(why, PLAIN_TEXT_NOTES["crashed"])
    return sanitize(
        f'<p class="render-fallback">{escapeHtml(note)}</p>\n'
        f'<pre class="plain-text"><code>{escapeHtml(text)}</code></pre>\n'
    )


def doc_id_for(message_pk: int) -> str:
    """The `doc_id` of a message's answer, the same in its final render and its live blocks."""
    return f"m{message_pk}"


def parse(
    text: str, citations: Sequence[Mapping[str, object]] | None = None, *, doc_id: str = ""
) -> tuple[list[Token], EnvType]:
    """`text`'s tokens, inline ones included, and the env to render them in (`render_tokens`):
    for rendering part of a block as it renders within the whole (`live_blocks`)."""
    env: dict[str, object] = {"citations": citations or ()}
    if doc_id:
        env["docId"] = doc_id
    return _md.parse(text, env), env


def render_tokens(tokens: Sequence[Token], env: EnvType, inside: str = "") -> str:
    """Sanitized HTML of a balanced run of `parse`'s tokens; `inside` (a tag: `ul`, `tbody`...)
    when they are its children: sanitized within it (as HTML parses them), returned without it."""
    html = _md.renderer.render(tokens, _md.options, env)
    if not inside:
        return sanitize(html)
    wrappers = {"tbody": ("<table>", "</table>"), "tr": ("<table><tbody>", "</tbody></table>")}
    before, after = wrappers.get(inside, ("", ""))
    opening, closing = f"{before}<{inside}>\n", f"</{inside}>{after}"
    cleaned = sanitize(opening + html + closing)
    if not (cleaned.startswith(opening) and cleaned.endswith(closing)):
        raise ValueError(f"not the children of <{inside}>")
    return cleaned[len(opening) : -len(closing)]


def parse_blocks(text: str) -> list[Token]:
    """The block-level tokens of `text` as the renderer parses it, without the inline pass: the
    structure `live_blocks` settles a streaming answer by."""
    state = StateCore(text, _md, {})
    normalize(state)
    block(state)
    return state.tokens
