"""A saved prompt's text and its `{{variables}}`: which it asks for, and the text with them filled.

A variable is `{{name}}` with a name of letters, digits, `_`, `-` or spaces (trimmed), as
Open WebUI writes them; anything else between braces stays as written. The same name twice is
asked for once and filled everywhere. The composer fills them in the browser
(`static/chatapp/prompts.js`, which follows the same pattern); `fill` is that rule, kept here so
that it is stated once and tested.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

VARIABLE = re.compile(r"\{\{\s*([A-Za-z0-9_][A-Za-z0-9_ -]{0,39}?)\s*\}\}")
"""`{{ name }}`; the same pattern as `prompts.js`'s."""

MAX_VARIABLES = 10
MAX_TEXT_CHARS = 20_000


@dataclass(frozen=True, slots=True)
class PromptEntry:
    """A prompt as the composer's `/` menu offers it."""

    name: str
    text: str
    variables: tuple[str, ...]
    shared: bool


def variables(text: str) -> tuple[str, ...]:
    """The variables `text` asks for, in order of first use, each once (at most
    `MAX_VARIABLES`: those after are left as written)."""
    found: list[str] = []
    for match in VARIABLE.finditer(text):
        name = match.group(1).strip()
        if name not in found:
            found.append(name)
    return tuple(found[:MAX_VARIABLES])


def fill(text: str, values: Mapping[str, str]) -> str:
    """`text` with each variable named in `values` replaced by its value (others stay)."""

    def replace(match: re.Match[str]) -> str:
        return values.get(match.group(1).strip(), match.group(0))

    return VARIABLE.sub(replace, text)
