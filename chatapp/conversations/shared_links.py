"""Shared links: a read-only copy of one branch of a conversation, for anyone with its URL.

A link's token is 256 random bits (`secrets.token_urlsafe(32)`), shown to its owner once, when the
link is made; the database keeps only its SHA-256 (`SharedLink.token_digest`), so a copy of the
database opens no link. A visit looks the digest of what it was given up in the database: a
guesser learns nothing from timing that would bring them nearer a real token.

The branch is fixed when it is shared: the path from the root down to the message the page
showed last (`SharedLink.leaf`), so a later turn, or another version of a message, is never
shown. A link opens while it is not revoked, its conversation and that message exist and its
owner's account is active; every visit asks the database again (and the page is `no-store`),
so a revoked link is gone at once.

What a link shows is decided here, once, for the page and anything else that shows a link
(`shown`): nothing of the owner's other conversations. A private tool's result (a search of
them, `Tool.private`; any MCP tool's) is kept back, and so is every answer written after it in
the branch, whose request held that result: such an answer is shown as a note naming the tool,
not its text, reasoning, tool calls or media (a model quotes what it found: titles, snippets,
IDs). An answer still being written is left out until it ends; audio and files are left out,
saying so. The link's title is the conversation's, unless a model wrote it from a first exchange
that held a private result: then it is the first question's line, which the page shows anyway.
A temporary chat is not kept, so it is not shared.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.http import Http404
from django.utils import timezone

from chatapp import tools
from chatapp.conversations.models import Conversation, Message, SharedLink
from chatapp.conversations.tree import MessageTree, shown_path
from chatapp.conversations.turns import title_from
from chatapp.errors import ChatAppError
from chatapp.tools.mcp import catalog

if TYPE_CHECKING:
    from django.contrib.auth.models import User

TOKEN_BYTES = 32
# What `token_urlsafe(TOKEN_BYTES)` makes: 43 characters of the URL-safe base64 alphabet.
TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{43}")
LEFT_OUT = {"audio": "an audio clip", "file": "a file"}


@dataclass(frozen=True, slots=True)
class NewLink:
    """A link just made, with its token: the only time the token is known."""

    link: SharedLink
    token: str


@dataclass(frozen=True, slots=True)
class OwnedLink:
    """One of a user's links as their list shows it."""

    link: SharedLink
    messages: int  # in the branch it shares


class NotShareable(ChatAppError):
    """The conversation cannot be shared (it is a temporary chat), in words."""


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create(user: User, conversation_pk: int, leaf_pk: int | None) -> NewLink:
    """A new link to the user's conversation, for the branch that ends at `leaf_pk` (the last
    message the page shows; None: the branch the conversation shows). Another user's
    conversation or message is a 404."""
    conversation = Conversation.objects.filter(pk=conversation_pk, user=user).first()
    if conversation is None:
        raise Http404("No such conversation.")
    if conversation.temporary:
        raise NotShareable("A temporary chat is not kept, so it cannot be shared.")
    if leaf_pk is None:
        leaf_pk = MessageTree(conversation.pk).shown_leaf(conversation.current_leaf_id)
    elif not Message.objects.filter(pk=leaf_pk, conversation=conversation).exists():
        raise Http404("No such message.")
    if leaf_pk is None:
        raise Http404("This conversation has no messages.")
    token = secrets.token_urlsafe(TOKEN_BYTES)
    link = SharedLink(conversation=conversation, leaf_id=leaf_pk, token_digest=digest(token))
    link.title = _title(conversation, shown(link))
    link.save()
    return NewLink(link, token)


def _title(conversation: Conversation, shared: list[SharedMessage]) -> str:
    """The link's title: the conversation's, unless a model wrote it from a first exchange that
    held a private result (its excerpt of the answer may quote it): the first question's line."""
    if conversation.title_source != Conversation.TitleSource.MODEL or not shared:
        return conversation.title
    first = [shared[0]]
    for item in shared[1:]:
        if item.message.role == Message.Role.USER:
            break
        first.append(item)
    if any(item.withheld or item.results_kept_back for item in first):
        return title_from(shared[0].message.content)
    return conversation.title


def live(token: str) -> SharedLink | None:
    """The link `token` opens, or None: unknown, revoked, or its owner's account closed."""
    if not TOKEN_SHAPE.fullmatch(token):
        return None
    return (
        SharedLink.objects.select_related("conversation")
        .filter(
            token_digest=digest(token),
            revoked_at__isnull=True,
            conversation__user__is_active=True,
        )
        .first()
    )


def branch_keys(link: SharedLink) -> list[int]:
    """The keys of the messages the link shares, root first."""
    return MessageTree(link.conversation_id).path(link.leaf_id)


@dataclass(frozen=True, slots=True)
class SharedMessage:
    """A message of a link's branch as whatever shows the link shows it: `message` as stored,
    and what of it is kept back."""

    message: Message
    position: int  # in the branch, from 1: the key of its images' URLs
    writing: bool  # an answer still being written, left out until it ends
    withheld: bool  # an answer written after a private tool's result: only a note, none of it
    tool_calls: list[dict[str, object]]  # as stored, less the results of private tools
    results_kept_back: bool  # a private tool's result, kept back from `tool_calls`
    left_out: str  # the media it has that are not shared, in words ("" for none)
    # The tools whose results are kept back, in words: those before a withheld answer, else its own
    private_tools: str = ""


def _private(call: dict[str, object]) -> bool:
    """A result that holds what the link's reader should not see: a private built-in's, or any
    MCP tool's (what a server returns may be its account's data, or the user's)."""
    name = str(call.get("name"))
    tool = tools.registry().get(name)
    private = tool.private if tool is not None else catalog.SEPARATOR in name
    return private and bool(call.get("result"))


def _tool_words(call: dict[str, object]) -> str:
    """A private tool as the shared page names it: a built-in by its title, an MCP server's
    tool by its name and server."""
    name = str(call.get("name"))
    tool = tools.registry().get(name)
    if tool is not None:
        return f"“{tool.title}”"
    server, _, tool_name = name.partition(catalog.SEPARATOR)
    return f"the MCP tool “{tool_name}” of “{server}”"


def _in_words(names: list[str]) -> str:
    names = list(dict.fromkeys(names))
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _left_out(message: Message) -> str:
    items = message.attachments if isinstance(message.attachments, list) else []
    kinds = [item.get("kind") for item in items if isinstance(item, dict)]
    words = [LEFT_OUT[kind] for kind in kinds if kind in LEFT_OUT]
    if not words:
        return ""
    return f"Not included in shared links: {', '.join(words)} from the model."


def shown(link: SharedLink) -> list[SharedMessage]:
    """The messages the link shares, root first, each with its generation and what of it is
    kept back (the module's docstring says what and why)."""
    messages = [item.message for item in shown_path(link.conversation, leaf_pk=link.leaf_id)]
    shared = []
    before: list[str] = []  # the private tools whose results the branch held so far
    for position, message in enumerate(messages, start=1):
        generation = getattr(message, "generation", None)
        writing = generation is not None and generation.is_running
        withheld = bool(before) and message.role == Message.Role.ASSISTANT
        stored = message.tool_calls if isinstance(message.tool_calls, list) else []
        calls = [call for call in stored if isinstance(call, dict)]
        own = [_tool_words(call) for call in calls if _private(call)]
        words = _in_words(before if withheld else own) if (before if withheld else own) else ""
        before += own
        calls = [{**call, "result": ""} if _private(call) else call for call in calls]
        if withheld:
            calls = []
        left_out = "" if withheld else _left_out(message)
        shared.append(
            SharedMessage(message, position, writing, withheld, calls, bool(own), left_out, words)
        )
    return shared


def shown_at(link: SharedLink, position: int) -> SharedMessage | None:
    """The message at `position` (from 1) in what the link shows, or None past its ends."""
    shared = shown(link)
    return shared[position - 1] if 1 <= position <= len(shared) else None


def links_of(user: User) -> list[OwnedLink]:
    """The user's links, newest first, revoked ones too."""
    links = list(SharedLink.objects.filter(conversation__user=user).select_related("conversation"))
    trees: dict[int, MessageTree] = {}
    for link in links:
        if link.conversation_id not in trees:
            trees[link.conversation_id] = MessageTree(link.conversation_id)
    return [OwnedLink(link, len(trees[link.conversation_id].path(link.leaf_id))) for link in links]


def owned(user: User, link_pk: int) -> SharedLink:
    """The user's link `link_pk`; another user's is a 404."""
    link = (
        SharedLink.objects.filter(pk=link_pk, conversation__user=user)
        .select_related("conversation")
        .first()
    )
    if link is None:
        raise Http404("No such link.")
    return link


def revoke(user: User, link_pk: int) -> SharedLink:
    """Revoke the user's link `link_pk` (once: revoking it again changes nothing)."""
    link = owned(user, link_pk)
    if link.revoked_at is None:
        link.revoked_at = timezone.now()
        link.save(update_fields=["revoked_at"])
    return link
