"""A conversation's message tree: versions, the branch shown, and the context an answer is sent.

A conversation is a tree (`Message.parent`): an edited question is a sibling of the question it
redoes, a regenerated answer of the answer, and nothing is deleted. The branch shown is the path
from the root to `Conversation.current_leaf` (the newest message when unset; that message's newest
descendant when it has any). Every new turn makes its answer the leaf; switching to a version
makes that version's newest descendant the leaf. The context of an answer is the path down to
its parent, whatever the page showed: answers without text (a failure before any token) are left
out, reasoning details go back unchanged, as Numes requires for signed or encrypted reasoning, and
tool calls that ran go back with their results.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import Prefetch

from chatapp.conversations import uploads
from chatapp.conversations.models import ENDED, Conversation, Message, Upload


@dataclass(frozen=True, slots=True)
class Versions:
    """A message's place among its versions (itself and its siblings of its role), oldest first."""

    position: int
    count: int
    previous_pk: int | None
    next_pk: int | None


@dataclass(frozen=True, slots=True)
class ShownMessage:
    """A message of the branch shown; `versions` is None when it is the only version. The
    answers of a comparison not yet chosen from are shown as one, `compared` (oldest first),
    with `message` the first and no versions."""

    message: Message
    versions: Versions | None
    compared: tuple[Message, ...] = ()


class MessageTree:
    """A conversation's messages as a tree of keys (no text): one query, for paths and versions."""

    def __init__(self, conversation_pk: int) -> None:
        self.parent: dict[int, int | None] = {}
        self.role: dict[int, str] = {}
        self.children: dict[int | None, list[int]] = {}
        rows = Message.objects.filter(conversation_id=conversation_pk).order_by("pk")
        for pk, parent_pk, role in rows.values_list("pk", "parent_id", "role"):
            self.parent[pk] = parent_pk
            self.role[pk] = role
            self.children.setdefault(parent_pk, []).append(pk)

    def newest_below(self, pk: int) -> int:
        """The newest message of `pk`'s subtree (itself included): always a leaf."""
        newest, stack = pk, [pk]
        while stack:
            below = self.children.get(stack.pop(), [])
            stack += below
            newest = max([newest, *below])
        return newest

    def shown_leaf(self, current_leaf_pk: int | None) -> int | None:
        if current_leaf_pk in self.parent:
            return self.newest_below(current_leaf_pk)
        return max(self.parent, default=None)

    def path(self, leaf_pk: int | None) -> list[int]:
        """The keys from the root down to `leaf_pk` (none for None)."""
        path: list[int] = []
        pk = leaf_pk
        while pk is not None:
            path.append(pk)
            pk = self.parent[pk]
        return path[::-1]

    def versions(self, pk: int) -> Versions | None:
        siblings = [s for s in self.children[self.parent[pk]] if self.role[s] == self.role[pk]]
        return _versions(siblings, pk)


def _versions(siblings: list[int], pk: int) -> Versions | None:
    if len(siblings) < 2:
        return None
    index = siblings.index(pk)
    previous_pk = siblings[index - 1] if index > 0 else None
    next_pk = siblings[index + 1] if index + 1 < len(siblings) else None
    return Versions(index + 1, len(siblings), previous_pk, next_pk)


def shown_path(
    conversation: Conversation, leaf_pk: int | None = None, since_pk: int | None = None
) -> list[ShownMessage]:
    """The branch shown, root first, with each message's versions: the path down to `leaf_pk`
    (None: the conversation's current leaf), from `since_pk` on (None: all of it)."""
    tree = MessageTree(conversation.pk)
    if leaf_pk is None:
        leaf_pk = tree.shown_leaf(conversation.current_leaf_id)
    path = tree.path(leaf_pk)
    if since_pk in path:
        path = path[path.index(since_pk) :]
    question = conversation.comparing_id
    ends_in_it = question is not None and path and tree.parent[path[-1]] == question
    compared = tree.children[question] if ends_in_it else []
    files = Prefetch("uploads", queryset=Upload.objects.defer("data", "text"))
    messages = (
        Message.objects.select_related("generation")
        .prefetch_related(files)
        .in_bulk([*path, *compared])
    )
    shown = [ShownMessage(messages[pk], tree.versions(pk)) for pk in path]
    if compared:
        answers = tuple(messages[pk] for pk in compared)
        shown[-1] = ShownMessage(answers[0], None, answers)
    return shown


def in_comparison(message: Message) -> bool:
    """Whether `message` is an answer of its conversation's comparison not yet chosen from."""
    comparing = message.conversation.comparing_id
    return comparing is not None and message.parent_id == comparing


def shown(message: Message) -> ShownMessage:
    """One message with its versions (for a render of that message alone)."""
    siblings = Message.objects.filter(
        conversation_id=message.conversation_id, parent_id=message.parent_id, role=message.role
    ).order_by("pk")
    return ShownMessage(message, _versions(list(siblings.values_list("pk", flat=True)), message.pk))


def context_for(
    conversation: Conversation, before: Message, *, images: bool = True
) -> list[dict[str, Any]]:
    """The messages to send for the answer `before`: its path from the root, `before` excluded.
    An answer whose tool calls ran is followed by their results (`_ran_calls`). `images`: the
    model takes images (else the user's images go as a line saying they were not sent)."""
    return context_through(conversation.pk, before.parent_id, images=images)


def context_through(
    conversation_pk: int, last_pk: int | None, *, images: bool = True
) -> list[dict[str, Any]]:
    """The messages to send from the root down to the message `last_pk`, included, each user
    message with the files attached to it (`uploads.user_content`)."""
    path = MessageTree(conversation_pk).path(last_pk)
    fields = ("role", "content", "reasoning_details", "tool_calls")
    messages = Message.objects.only(*fields).in_bulk(path)
    attached: dict[int, list[Upload]] = {}
    for upload in Upload.objects.filter(message_id__in=path).defer("data").order_by("position"):
        attached.setdefault(upload.message_id, []).append(upload)
    in_order = [upload for pk in path for upload in attached.get(pk, [])]
    sent = uploads.context_images(in_order, images) if in_order else {}
    context: list[dict[str, Any]] = []
    for message in (messages[pk] for pk in path):
        if message.role == Message.Role.USER:
            content = uploads.user_content(message.content, attached.get(message.pk, []), sent)
            context.append({"role": "user", "content": content})
            continue
        calls, results = _ran_calls(message.tool_calls)
        if message.content or message.reasoning_details or calls:
            # OpenAI's form: no text beside the calls is `null`, not an empty string.
            text = message.content or (None if calls else "")
            answer: dict[str, Any] = {"role": "assistant", "content": text}
            if message.reasoning_details:
                answer["reasoning_details"] = message.reasoning_details
            if calls:
                answer["tool_calls"] = calls
            context.append(answer)
            context.extend(results)
    return context


def _ran_calls(
    stored: Iterable[Mapping[str, Any]],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """What an answer's calls that ran add to a later request: the `tool_calls` of its assistant
    message, and one `tool` message per call after it (OpenAI's form, which the four gateways
    take). Calls that never ran (no tools were offered) are left out, as before tools ran."""
    upstream_calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for call in stored:
        if call.get("status") not in ENDED or not call.get("id"):
            continue
        upstream_calls.append(
            {
                "id": call["id"],
                "type": "function",
                "function": {
                    "name": call.get("name") or "",
                    "arguments": call.get("arguments") or "",
                },
            }
        )
        results.append(
            {"role": "tool", "tool_call_id": call["id"], "content": call.get("result") or ""}
        )
    return upstream_calls, results
