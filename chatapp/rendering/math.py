"""Math in answers: `$…$`, `$$…$$`, `\\(…\\)` and `\\[…\\]` as MathML, made on the server.

Models write LaTeX; Chromium, Firefox and Safari draw MathML natively, so the page needs no
script or font for it. markdown-it rules here find the formulas (mdit-py-plugins' dollarmath
for `$`, with the pandoc rule that keeps prose dollars text: an opening `$` is not followed by
a space, a closing one not preceded by a space nor followed by a digit, so "costs $5 and $10"
stays as written; our own rules for the bracket forms, which markdown-it would otherwise read as
escaped brackets), and latex2mathml turns each into MathML.

latex2mathml is not a sanitizer: its string output unescapes `\\text{<script>}` into markup.
So we take its element tree and serialize it ourselves (text escaped), and the one sanitizer
(`markdown.sanitize`) then keeps only `MATH_TAGS` with `MATH_ATTRIBUTES`, each value a plain
word or length (`MATH_VALUE`): no `href`, `style`, `class` or `xlink:*` (what `\\href`,
`\\style`, `\\class` and `\\color` would make), no `maction`, `annotation-xml` or `semantics`
(whose HTML content is parsed as HTML). A formula longer than `MAX_FORMULA`, one latex2mathml
rejects, or one with a command it does not know (it would show `\\foo` as a variable) shows as
its source, in code style. This runs where all rendering does: in the render pool, under its
deadline (`pool.py`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from xml.etree.ElementTree import Element, tostring

from latex2mathml.converter import convert_to_element
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from markdown_it.rules_block import StateBlock
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from mdit_py_plugins.dollarmath.index import math_block_dollar, math_inline_dollar

type BlockRule = Callable[[StateBlock, int, int, bool], bool]

MAX_FORMULA = 2_000  # characters of LaTeX in one formula; a longer one shows as its source
MATH_CACHE = 512  # conversions a render process keeps (at most about 30 KB of MathML each)

MATH_TAGS = frozenset(
    {
        "math", "mrow", "mi", "mn", "mo", "mtext", "mspace", "mfrac", "msqrt", "mroot",
        "msub", "msup", "msubsup", "munder", "mover", "munderover", "mtable", "mtr", "mtd",
        "mstyle", "mpadded", "mphantom", "menclose",
    }
)  # fmt: skip
MATH_ATTRIBUTES = {
    "math": {"display"},
    "mi": {"mathvariant"},
    "mo": {
        "stretchy", "fence", "separator", "lspace", "rspace", "minsize", "maxsize",
        "largeop", "movablelimits", "accent", "form",
    },
    "mn": {"mathvariant"},
    "mtext": {"mathvariant"},
    "mspace": {"width", "height", "depth"},
    "mfrac": {"linethickness"},
    "munder": {"accentunder"},
    "mover": {"accent"},
    "munderover": {"accent", "accentunder"},
    "mtable": {"columnalign", "rowspacing", "columnspacing", "columnlines", "displaystyle"},
    "mtd": {"columnalign"},
    "mstyle": {"displaystyle", "scriptlevel", "mathvariant"},
    "mpadded": {"width", "lspace", "voffset", "height", "depth"},
    "menclose": {"notation"},
}  # fmt: skip
# A word, number or length ("0.167em", "-0.5width", "true", "bold-italic", "left center"):
# never a URL, a colon or a parenthesis.
MATH_VALUE = re.compile(r"[A-Za-z0-9 .%+-]{1,40}")
MATH_SOURCE_CLASS = "math-source"
MATH_BLOCK_CLASS = "math-block"

_CHARACTER_REFERENCE = re.compile(r"&#x([0-9A-Fa-f]{1,6});")


def _decoded(text: str) -> str:
    """latex2mathml writes symbols as `&#x…;` in the tree's text; the characters themselves."""
    return _CHARACTER_REFERENCE.sub(lambda m: _character(int(m[1], 16)), text)


def _character(code: int) -> str:
    return chr(code) if 0 < code < 0x110000 and not 0xD800 <= code < 0xE000 else "\ufffd"


def _unknown_command(element: Element) -> bool:
    return any((node.text or "").startswith("\\") for node in element.iter())


@functools.lru_cache(maxsize=MATH_CACHE)
def mathml(latex: str, display: bool) -> str | None:
    """MathML for `latex` (escaped, not yet sanitized), or None when it does not convert.
    Cached: a streaming answer's draft renders its tail's formulas again and again, and answers
    repeat short ones (`$x$`); a conversion takes about 0.3 ms for `$a$`, 80 for a long sum."""
    latex = latex.strip()
    if not latex or len(latex) > MAX_FORMULA:
        return None
    try:
        element = convert_to_element(latex, xmlns="", display="block" if display else "inline")
    except Exception:  # latex2mathml raises many kinds on malformed input
        return None
    if _unknown_command(element):
        return None
    for node in element.iter():
        node.attrib.pop("xmlns", None)
        if node.text:
            node.text = _decoded(node.text)
        if node.tail:
            node.tail = _decoded(node.tail)
    return tostring(element, encoding="unicode", short_empty_elements=False)


def formula_html(latex: str, markup: str, display: bool) -> str:
    """A formula as MathML, or as its source (with its delimiters) in code style; delimiters
    around nothing but spaces (`$$ $$`) are text."""
    closing = {"\\(": "\\)", "\\[": "\\]"}.get(markup, markup)
    source = escapeHtml(markup + latex + closing)
    if not latex.strip():
        return source
    converted = mathml(latex, display)
    if converted is None:
        return f'<code class="{MATH_SOURCE_CLASS}">{source}</code>'
    return converted


_BRACKETS = {"(": ("\\)", False), "[": ("\\]", True)}


def _math_inline_bracket(state: StateInline, silent: bool) -> bool:
    """`\\(…\\)` (inline) and `\\[…\\]` (display) inside a paragraph; before markdown-it's
    `escape`, which would read `\\(` as an escaped parenthesis. Where the last closing delimiter
    is is found once per inline run, so many unclosed ones do not each scan to its end."""
    src, pos = state.src, state.pos
    if src[pos] != "\\" or pos + 1 >= state.posMax or src[pos + 1] not in _BRACKETS:
        return False
    closing, display = _BRACKETS[src[pos + 1]]
    key = -1 if display else -2  # markdown-it's own keys in `cache` are positions, never < 0
    last = state.cache.get(key)
    if last is None:
        last = state.cache[key] = src.rfind(closing, 0, state.posMax)
    if last < pos + 2:
        return False
    end = src.find(closing, pos + 2, state.posMax)
    if not src[pos + 2 : end].strip():
        return False
    if not silent:
        token = state.push("math_inline_double" if display else "math_inline", "math", 0)
        token.content = src[pos + 2 : end]
        token.markup = "\\" + src[pos + 1]
    state.pos = end + len(closing)
    return True


def _render_inline(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    token = tokens[idx]
    return formula_html(token.content, token.markup, token.type == "math_inline_double")


def _render_block(
    renderer: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    """A `$$` block on its own lines: in a block of its own, which scrolls when it is wider than
    the answer (a phone)."""
    formula = formula_html(tokens[idx].content, "$$", True)
    return f'<div class="{MATH_BLOCK_CLASS}">{formula}</div>\n'


def _without_effects_when_silent(rule: BlockRule) -> BlockRule:
    """dollarmath's block rule pushes its token even when asked silently (as a paragraph asks
    whether a line interrupts it), which would show the formula twice."""

    def silent_safe(state: StateBlock, start: int, end: int, silent: bool) -> bool:
        if not silent:
            return rule(state, start, end, silent)
        tokens, line = len(state.tokens), state.line
        found = rule(state, start, end, silent)
        del state.tokens[tokens:]
        state.line = line
        return found

    return silent_safe


def math_plugin(md: MarkdownIt) -> None:
    """The math rules and their render rules, on `md`. A `$$` block may interrupt a paragraph
    (models write "so:" and the formula on the next line)."""
    md.inline.ruler.before("escape", "math_inline_bracket", _math_inline_bracket)
    md.inline.ruler.before(
        "escape",
        "math_inline",
        math_inline_dollar(allow_space=False, allow_digits=False, allow_double=True),
    )
    md.block.ruler.before(
        "fence",
        "math_block",
        _without_effects_when_silent(
            math_block_dollar(allow_labels=False, allow_blank_lines=False)
        ),
        {"alt": ["paragraph", "reference", "blockquote", "list"]},
    )
    md.add_render_rule("math_inline", _render_inline)
    md.add_render_rule("math_inline_double", _render_inline)
    md.add_render_rule("math_block", _render_block)
