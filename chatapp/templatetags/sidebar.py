"""`{% sidebar_items entries %}`: the sidebar's entries, each as `_sidebar_item.html` draws it,
without rendering the template once per entry.

A sidebar lists up to 200 conversations, and rendering the item template for each (an include,
six `{% url %}`s, a dozen lookups) was most of a page's CPU for a user with some history: about
0.3 ms an entry, 60 ms a page. An entry's markup depends on its pk, its title and the name of
the app it was imported from, which are substituted as text, and on four yes-or-no facts
(titled, pinned, imported, the one on screen). So the template is rendered once for each
combination that occurs, with a stand-in conversation whose pk and texts are markers, and each
entry is its combination's stencil with the markers replaced by its own values, escaped as the
template escapes them. The template stays the one place the markup is written;
`tests/chatapp/templatetags/test_sidebar_items.py` checks the result equals the include's for every
combination, so a template change the stencil cannot follow fails there.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django import template
from django.template.loader import get_template
from django.utils.html import conditional_escape
from django.utils.safestring import SafeString, mark_safe

if TYPE_CHECKING:
    from chatapp.views.library import Entry

register = template.Library()

ITEM = "chatapp/_sidebar_item.html"
# Markers no page holds: a pk of 15 digits (the URLs take digits only), private-use characters.
PK_MARK = 987_654_320_123_456
TITLE_MARK = "\ue000title\ue000"
IMPORTED_MARK = "\ue000imported\ue000"


@dataclass(frozen=True, slots=True)
class _StandIn:
    """What the item template reads of a conversation, with markers for the values."""

    title: str
    pinned_at: bool
    imported_from: str

    @property
    def pk(self) -> int:
        return PK_MARK

    def get_imported_from_display(self) -> str:
        return IMPORTED_MARK


def _stencil(key: tuple[bool, bool, bool, bool], context: Any) -> str:
    titled, pinned, imported, current = key
    stand_in = _StandIn(TITLE_MARK if titled else "", pinned, "x" if imported else "")
    with context.push(item=stand_in, current=current):
        return str(get_template(ITEM).template.render(context))  # type: ignore[attr-defined]


@register.simple_tag(takes_context=True)
def sidebar_items(context: Any, entries: Iterable[Entry]) -> SafeString:
    stencils: dict[tuple[bool, bool, bool, bool], str] = {}
    parts = []
    for entry in entries:
        item = entry.conversation
        pinned, imported = item.pinned_at is not None, bool(item.imported_from)
        key = (bool(item.title), pinned, imported, entry.current)
        stencil = stencils.get(key)
        if stencil is None:
            stencil = stencils[key] = _stencil(key, context)
        html = stencil.replace(str(PK_MARK), str(item.pk))
        if key[0]:
            html = html.replace(TITLE_MARK, str(conditional_escape(item.title)))
        if key[2]:
            shown = item.get_imported_from_display()
            html = html.replace(IMPORTED_MARK, str(conditional_escape(shown)))
        parts.append(html)
    return mark_safe("".join(parts))  # each part is the template's, its values escaped
