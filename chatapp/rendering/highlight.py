"""Code blocks in model answers, highlighted on the server by Pygments.

Pygments emits `<span class="k">` tokens (CSS classes, never inline style, so the CSP stays
strict); `static/chatapp/highlight.css` colours them for light and dark themes. Only blocks up
to `MAX_CODE_CHARS` are highlighted, and only in a language of `LEXERS`, an allow-list of common
languages whose lexers are well-behaved: the fence's word is the model's, and several of the
~600 lexers Pygments ships have regexes that backtrack exponentially (a 58-character `registry`
block held the server for 23 s). The list is what keeps normal answers fast; the render pool's
deadline (`pool.py`) is what bounds the rest. Anything else stays plain escaped text. The
HTML still goes through the one sanitizer (`markdown.sanitize`).

Only tokens the stylesheet colours get a span, and a run of one class gets one: whitespace, plain
names and punctuation are text. Pygments' own formatter spans every token, which made a code
block's HTML five times its source, sent once while the answer streams and again in the page.
"""

from __future__ import annotations

from functools import cache
from html import escape

from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import get_lexer_by_name
from pygments.token import STANDARD_TYPES, _TokenType

__all__ = ["LEXERS", "MAX_CODE_CHARS", "highlighted", "lexer_for", "lexer_name"]

MAX_CODE_CHARS = 50_000

# The Pygments lexers code may be highlighted with (by their Pygments name), and the words a
# fence may name each by (lower case; Pygments' own aliases are not consulted).
LEXERS: dict[str, tuple[str, ...]] = {
    "python": ("python", "py", "python3", "py3"),
    "pycon": ("pycon",),
    "javascript": ("javascript", "js", "mjs", "cjs", "node"),
    "typescript": ("typescript", "ts"),
    "jsx": ("jsx",),
    "tsx": ("tsx",),
    "json": ("json", "jsonc", "json5"),
    "bash": ("bash", "sh", "shell", "zsh", "ksh"),
    "console": ("console", "shell-session"),
    "html": ("html", "htm", "xhtml"),
    "xml": ("xml", "svg"),
    "css": ("css",),
    "scss": ("scss",),
    "sql": ("sql", "postgresql", "mysql", "sqlite"),
    "c": ("c", "h"),
    "cpp": ("cpp", "c++", "cc", "cxx", "hpp"),
    "csharp": ("csharp", "c#", "cs"),
    "go": ("go", "golang"),
    "rust": ("rust", "rs"),
    "java": ("java",),
    "kotlin": ("kotlin", "kt"),
    "swift": ("swift",),
    "ruby": ("ruby", "rb"),
    "php": ("php",),
    "lua": ("lua",),
    "yaml": ("yaml", "yml"),
    "toml": ("toml",),
    "ini": ("ini", "cfg", "conf"),
    "diff": ("diff", "patch", "udiff"),
    "docker": ("dockerfile", "docker"),
    "make": ("makefile", "make"),
    "graphql": ("graphql", "gql"),
}
_NAMES = {alias: name for name, aliases in LEXERS.items() for alias in aliases}


def lexer_name(language: str) -> str | None:
    """The `LEXERS` name a fence's word resolves to, else None (not highlighted)."""
    return _NAMES.get(language.strip().lower())


@cache
def lexer_for(name: str) -> Lexer:
    return get_lexer_by_name(name, stripnl=False, ensurenl=False)


def highlighted(code: str, language: str) -> str:
    """The code's token spans, or "" to leave it to the plain renderer."""
    name = lexer_name(language)
    if name is None or len(code) > MAX_CODE_CHARS:
        return ""
    lexer = lexer_for(name)
    parts: list[str] = []
    run_class, run = "", list[str]()
    for ttype, value in lexer.get_tokens(code):
        css = _css_class(ttype)
        if css != run_class and run:
            parts.append(_span(run_class, "".join(run)))
            run = []
        run_class = css
        run.append(value)
    if run:
        parts.append(_span(run_class, "".join(run)))
    return "".join(parts)


def _span(css: str, text: str) -> str:
    text = escape(text, quote=False)
    return f'<span class="{css}">{text}</span>' if css else text


@cache
def _css_class(ttype: _TokenType) -> str:
    """The token's class if the stylesheet colours it, else "" (shown as plain text)."""
    while ttype not in STANDARD_TYPES and ttype.parent is not None:
        ttype = ttype.parent
    css = STANDARD_TYPES.get(ttype, "")
    return css if css in _styled_classes() else ""


_SCOPE = ".content pre code"
LIGHT_STYLE = "default"
DARK_STYLE = "github-dark"


# Whitespace is invisible whatever its colour.
_UNSTYLED = frozenset({"w"})


def _style_rules(style: str) -> dict[str, str]:
    """Pygments' rules for token classes only, by class (not its `pre`, line-number or
    background rules: the page styles blocks itself)."""
    css: str = HtmlFormatter(style=style).get_style_defs(_SCOPE)  # type: ignore[no-untyped-call]
    prefix = _SCOPE + " ."
    rules = {}
    for line in css.splitlines():
        if line.startswith(prefix):
            rules[line.removeprefix(prefix).split(" ", 1)[0]] = line
    return rules


@cache
def _styled_classes() -> frozenset[str]:
    """The classes the light theme colours: the others look like the text around them (the
    dark theme's rules for them are its text colour)."""
    return frozenset(_style_rules(LIGHT_STYLE)) - _UNSTYLED


def _token_rules(style: str) -> list[str]:
    styled = _styled_classes()
    return [rule for css, rule in _style_rules(style).items() if css in styled]


# The dark rules apply as chat.css's colours do: when the theme switch (static/chatapp/theme.js)
# says dark, or the system does and the switch does not say light.
_DARK_CHOSEN = ':root[data-theme="dark"] '
_DARK_SYSTEM = ':root:not([data-theme="light"]) '


def stylesheet() -> str:
    """`static/chatapp/highlight.css`, which a test keeps equal to this."""
    dark = _token_rules(DARK_STYLE)
    chosen = "\n".join(_DARK_CHOSEN + rule for rule in dark)
    system = "\n".join("  " + _DARK_SYSTEM + rule for rule in dark)
    return (
        f"/* Generated by chatapp.rendering.highlight.stylesheet() (Pygments {LIGHT_STYLE} and "
        f"{DARK_STYLE}); do not edit. */\n"
        + "\n".join(_token_rules(LIGHT_STYLE))
        + f"\n{chosen}\n@media (prefers-color-scheme: dark) {{\n{system}\n}}\n"
    )
