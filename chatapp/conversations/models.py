"""Conversations, their messages (a tree: branches are siblings), the files a user attached
(`Upload`), shared links to a branch (`SharedLink`) and the sidebar's folders (`Folder`).
Registered by `chatapp.models` (app label `chatapp`)."""

from __future__ import annotations

from typing import Literal

from django.conf import settings
from django.db import models

from chatapp.assistants.models import AnswerSettings, Assistant
from chatapp.gateways.models import Gateway


class Folder(models.Model):
    """A user's named group of conversations in the sidebar (`conversations/organising.py`).
    Deleting one keeps its conversations: they go back to the date groups."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="folders"
    )
    name = models.CharField(max_length=100)
    collapsed = models.BooleanField(default=False, help_text="Folded shut in the sidebar.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return self.name


class Conversation(AnswerSettings):
    class ImportSource(models.TextChoices):
        """Where an imported conversation came from (`conversations/importing.py`); blank for
        one written here. Its answers have no generation: nothing was asked of a gateway."""

        NONE = "", "not imported"
        CHATGPT = "chatgpt", "ChatGPT"
        OPEN_WEBUI = "open_webui", "Open WebUI"

    class TitleSource(models.TextChoices):
        """Who wrote the title: its first line until a model's title replaces it; a user's
        rename always wins, and nothing replaces it."""

        FIRST_LINE = "first_line", "first line"
        MODEL = "model", "written by a model"
        USER = "user", "renamed"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="conversations"
    )
    title = models.CharField(max_length=200, blank=True)
    title_source = models.CharField(
        max_length=16, choices=TitleSource.choices, default=TitleSource.FIRST_LINE
    )
    gateway = models.ForeignKey(
        Gateway, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    model = models.CharField(max_length=200, blank=True, help_text="Last model used.")
    # The last message of the branch shown (None: the newest); the path up from it is the
    # conversation as read, and the context of what is generated after it.
    current_leaf = models.ForeignKey(
        "Message", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # A question sent to several models at once whose answers stand side by side until one is
    # chosen (`conversations/comparison.py`); None once chosen, or when the next turn starts.
    comparing = models.ForeignKey(
        "Message", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # The assistant it was started with, and its name then (kept if the assistant goes).
    assistant = models.ForeignKey(
        Assistant, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    assistant_name = models.CharField(max_length=100, blank=True)
    # A temporary chat (`conversations/temporary.py`): out of the sidebar and search, and deleted
    # once no page has shown it for a while; its generations stay in the ledger. `watchers`
    # counts the sockets watching it, `left_at` is when the last one left.
    temporary = models.BooleanField(default=False)
    watchers = models.IntegerField(default=0, editable=False)
    left_at = models.DateTimeField(null=True, blank=True, editable=False)
    # Keeping many (`conversations/organising.py`): set with `update()`, so that pinning, filing
    # or archiving does not count as activity (`updated_at`, the sidebar's date groups).
    folder = models.ForeignKey(
        Folder, on_delete=models.SET_NULL, null=True, blank=True, related_name="conversations"
    )
    pinned_at = models.DateTimeField(null=True, blank=True, help_text="Pinned: listed first.")
    archived_at = models.DateTimeField(
        null=True, blank=True, help_text="Archived: out of the sidebar, still searchable."
    )
    imported_from = models.CharField(
        max_length=16, choices=ImportSource.choices, blank=True, editable=False
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at", "-id"]
        indexes = [models.Index(fields=["user", "-updated_at"])]

    def __str__(self) -> str:
        return self.title or f"Conversation {self.pk}"


# A tool call's status as its message stores it (`Message.tool_calls`): running, then one of
# `ENDED`. The tool loop writes it (`chatapp.streaming.tool_loop`); the tree reads it.
type CallStatus = Literal["running", "done", "error", "cancelled", "not_run"]
ENDED: frozenset[str] = frozenset({"done", "error", "cancelled", "not_run"})


class Message(models.Model):
    class Role(models.TextChoices):
        USER = "user"
        ASSISTANT = "assistant"

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="messages"
    )
    role = models.CharField(max_length=16, choices=Role.choices)
    # Messages form a tree: a user message answers to the assistant message before it (None for
    # the first), an answer to its user message. Siblings are a message's other versions: an
    # edited question, a regenerated answer.
    parent = models.ForeignKey(
        "self", on_delete=models.CASCADE, null=True, blank=True, related_name="children"
    )
    content = models.TextField(blank=True)
    reasoning = models.TextField(blank=True)
    # Exactly as received, to send back unchanged where the dialect requires it.
    reasoning_details = models.JSONField(default=list, blank=True)
    # As streamed ({"index", "id", "name", "arguments"}), and once the app ran them, with the run:
    # "status" (done | error | cancelled | not_run), "result" (the text the model was sent) and
    # "duration_ms".
    tool_calls = models.JSONField(default=list, blank=True)
    annotations = models.JSONField(default=list, blank=True)
    # Images, audio and files the gateway sent: list of {"kind", "media_type", "url"|"data", ...}.
    attachments = models.JSONField(default=list, blank=True)
    # An answer's final render (sanitized HTML), made once when it ends, so a page view renders
    # nothing; `html_key` says of what: the renderer's version, the content and the citations
    # (`answer_html.render_key`; "" for none yet). A render of anything else is not used.
    html = models.TextField(blank=True)
    html_key = models.CharField(max_length=64, blank=True)
    # An imported answer's model, as the other app named it (ChatGPT's `metadata.model_slug`,
    # Open WebUI's `model`); "" for everything else: an answer made here has its generation's.
    imported_model = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:60]}"


class Upload(models.Model):
    """A file the user attached to their message, kept with it and served only to its owner.
    `data` is the file as sent; `text` what the model is sent of a document (its text, or a PDF's
    extracted text, cut at the caps `conversations/uploads.py` states; "" for an image)."""

    class Kind(models.TextChoices):
        IMAGE = "image", "image"
        DOCUMENT = "document", "document"

    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="uploads")
    position = models.PositiveSmallIntegerField()
    kind = models.CharField(max_length=16, choices=Kind.choices)
    filename = models.CharField(max_length=200)
    media_type = models.CharField(max_length=100)
    size = models.PositiveIntegerField(help_text="Bytes, as sent.")
    data = models.BinaryField()
    text = models.TextField(blank=True)
    # A PDF's pages, and how many of them `text` was read from (None: not a PDF).
    pages = models.PositiveIntegerField(null=True, blank=True)
    pages_read = models.PositiveIntegerField(null=True, blank=True)
    # Whether `text` stops short of the document's (the character cap).
    cut = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["message", "position"]
        constraints = [
            models.UniqueConstraint(fields=["message", "position"], name="one_upload_per_place")
        ]

    def __str__(self) -> str:
        return f"{self.filename} ({self.media_type}, {self.size} bytes)"


class SharedLink(models.Model):
    """A read-only link to a conversation's branch: the path from its root down to `leaf`, the
    message it ended at when it was shared, so later messages are never shown. Only the SHA-256
    of its token is kept (`conversations/shared_links.py`); the token itself is shown once.
    Deleting the conversation or the message deletes the link; revoking it keeps the row."""

    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="shared_links"
    )
    leaf = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="+")
    title = models.CharField(max_length=200, blank=True, help_text="As it was when shared.")
    token_digest = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"Shared link {self.pk} to {self.title or self.conversation_id}"
