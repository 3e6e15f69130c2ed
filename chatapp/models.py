"""Conversations, their messages, and the generation record behind each assistant answer.

A `Generation` is the bookkeeping of one upstream request: its status moves from `streaming` to
exactly one terminal state, and it keeps what the gateway reported (IDs, tokens, cost with its
unit and where the number came from) so every answer's cost is on record. The answer's text lives
on the `Message`, flushed there while streaming so a crash loses at most a couple of seconds.

Glossary (the code uses these words for these things, and no other):

- answer: an assistant `Message`, written by one generation.
- generation: one upstream request and its `Generation` row in the cost ledger; `Job` is what the
  worker is asked to run for it, `JobEnd` how it ended, `StartedGeneration` what starting one
  returns. It ends `completed` when it ended normally (the stream's own `Completion.outcome` says
  `complete`, the conformance contract's word for a stream read to `[DONE]` without error).
- turn: the user's message and the answer to it, one generation or, when the model calls tools,
  several rounds.
- round: one request of a tool-calling turn (`Generation.tool_round`): round 1 answers the user's
  message, each later one continues from the tool results of the round before.
- gateway: a configured OpenAI-compatible endpoint (`Gateway`), with its key and cost unit.
- dialect: which documented API a gateway speaks (`gateway_client.dialects`), set or detected.
- read aloud: an answer spoken through the gateway's `POST /audio/speech`: a generation of kind
  `Kind.READ_ALOUD` with no answer of its own (`read_aloud` is the answer it reads), its audio
  kept in `ReadAloudAudio`. Its stored kind value is `"speech"`, kept from before the name (money
  rows, CSV exports and the admin's filter links carry it); "speech" otherwise names only the
  upstream endpoint and its model and voice (`Gateway.speech_model`, `speech_voice`).
- attachment kinds (`Message.attachments`): `image_url`, an image kept as the URL it came with;
  `image`, an image kept as bytes and served from our origin; `audio`, `file`, `note`.
- upload: a file the user attached to their message (`Upload`, `conversations/uploads.py`): an
  image sent upstream as an `image_url` part, or a document sent as its text; unlike the
  attachments above, which a gateway sent with an answer.
- shared link: a read-only link to one branch of a conversation (`SharedLink`), by an
  unguessable token of which only a digest is kept.
- feedback: a user's thumbs up or down on an answer (`Feedback`), with an optional comment.
- group: a user group, Django's `auth.Group` (made in the admin or mapped from a sign-in
  provider); its `GroupPolicy` says which models and tools its members may use, its
  `SpendingLimit`s what they may spend together, and `GenerationGroup` which generations were
  its (`LedgerDayGroup`, once folded). (The cost summary's `GroupTotals` are rows of a table,
  of any kind.)
- keys: `*_pk` holds one of our primary keys; `*_id` is a gateway's ID (generation, request, tool
  call) or Django's foreign-key attribute (`conversation_id`).
"""

from __future__ import annotations

import uuid
from contextlib import nullcontext
from datetime import datetime
from decimal import Decimal
from typing import Any, NoReturn

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models, transaction

from chatapp.costs.units import CostUnit
from chatapp.errors import LedgerIsAppendOnly
from gateway_client.dialects import DIALECTS


class Gateway(models.Model):
    """One OpenAI-compatible gateway a user can chat through.

    The API key is stored encrypted (`key_vault`), or named as an environment variable; it is
    never rendered back in a form, sent to a browser or logged. `emulated` is the built-in
    emulator, whose URL is only known once it runs: its `base_url` is a path under it.
    """

    # django-stubs types only the class syntax, not the functional one that builds from a table.
    Dialect: type[models.TextChoices] = models.TextChoices(  # type: ignore[call-overload]
        "Dialect",
        [("AUTO", ("", "auto-detect"))]
        + [(name.upper(), (name, facts.title)) for name, facts in DIALECTS.items()],
    )
    """Blank for auto-detect, then each dialect of `gateway_client.dialects.DIALECTS`."""

    name = models.CharField(max_length=100, unique=True)
    base_url = models.CharField(
        "base URL", max_length=500, help_text="e.g. https://api.numes.ai/api/v1"
    )
    dialect = models.CharField(
        max_length=16,
        choices=Dialect.choices,
        blank=True,
        help_text="Blank: detected from what the gateway sends (shown below once it is asked).",
    )
    detected_dialect = models.CharField(
        max_length=16, choices=Dialect.choices, blank=True, editable=False
    )
    """What `gateway_client.detection` found when `dialect` is blank; used in its place."""
    detection_note = models.CharField(max_length=300, blank=True, editable=False)
    """How it was found, or why nothing was ("" while it has not been asked)."""
    cost_unit = models.CharField(
        max_length=16,
        choices=CostUnit.choices,
        help_text="What the gateway's usage.cost counts in for this key (Numes: USD credits, "
        "or satoshis for a BTC key). Osmexo's x_llm_cost_micro is always micro-USD.",
    )
    enabled = models.BooleanField(default=True)
    speech_model = models.CharField(
        max_length=200,
        blank=True,
        help_text="The model Read aloud asks for (POST /audio/speech, Numes only); empty: none.",
    )
    speech_voice = models.CharField(max_length=100, blank=True, help_text="Empty: the model's.")
    title_model = models.CharField(
        max_length=200,
        blank=True,
        help_text="The model that writes a new conversation's title from its first exchange "
        "(a generation of its own in the ledger); empty: the conversation's own model.",
    )
    emulated = models.BooleanField(default=False, editable=False)
    api_key_encrypted = models.TextField(blank=True, editable=False)
    api_key_env = models.CharField(
        "API key environment variable",
        max_length=100,
        blank=True,
        help_text="Read the key from this environment variable instead of storing it.",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ModelPrice(models.Model):
    """A model's price per token, in its gateway's cost unit: what estimates multiply by."""

    class Source(models.TextChoices):
        ADMIN = "admin", "set by an admin"
        GATEWAY = "gateway", "the gateway's price list"

    gateway = models.ForeignKey(Gateway, on_delete=models.CASCADE, related_name="prices")
    model = models.CharField(max_length=200)
    prompt = models.DecimalField("per prompt token", max_digits=24, decimal_places=15)
    completion = models.DecimalField("per completion token", max_digits=24, decimal_places=15)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.ADMIN)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["gateway", "model"]
        constraints = [
            models.UniqueConstraint(fields=["gateway", "model"], name="one_price_per_model")
        ]

    def __str__(self) -> str:
        return f"{self.model} @ {self.gateway}"


class AnswerSettings(models.Model):
    """What a conversation asks of its answers: a system prompt and the sampling parameters.
    Empty values leave them to the gateway (`request_options.py` says how each is sent)."""

    class ReasoningEffort(models.TextChoices):
        DEFAULT = "", "the model's default"
        NONE = "none", "none"
        LOW = "low", "low"
        MEDIUM = "medium", "medium"
        HIGH = "high", "high"

    system_prompt = models.TextField(blank=True)
    temperature = models.FloatField(null=True, blank=True)
    max_tokens = models.PositiveIntegerField(null=True, blank=True)
    reasoning_effort = models.CharField(max_length=16, choices=ReasoningEffort.choices, blank=True)
    # Names of the tools the model may call (`chatapp/tools`); those an admin turned off are not
    # offered whatever this says.
    tools = models.JSONField(default=list, blank=True)

    class Meta:
        abstract = True


class ChatDefaults(AnswerSettings):
    """A user's settings for new conversations (each conversation then keeps its own copy)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_defaults"
    )

    class Meta:
        verbose_name_plural = "chat defaults"

    def __str__(self) -> str:
        return f"Defaults of {self.user}"


class SharedOrOwn(models.Model):
    """Something a user keeps for themselves (`owner`), or an admin shares (no owner) with
    everyone or, when `groups` names some, with their members only (`starting/sharing.py`)."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="+",
        help_text="Empty: shared by an admin (with the groups below, or with everyone).",
    )
    groups = models.ManyToManyField(
        "auth.Group",
        blank=True,
        related_name="+",
        help_text="Shared ones only: the groups whose members see it; none: everyone.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class Assistant(AnswerSettings, SharedOrOwn):
    """A way to start a chat (LibreChat's presets, Open WebUI's models): a name, a model and the
    answer settings a new conversation copies when it is chosen (its system prompt, sampling and
    tools), as a user's `ChatDefaults` are copied otherwise."""

    name = models.CharField(max_length=100)
    description = models.CharField(max_length=200, blank=True)
    # The model picked with it (None and "": whatever the picker shows); a gateway deleted
    # leaves the default one.
    gateway = models.ForeignKey(
        Gateway, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    model = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return self.name


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


class Prompt(SharedOrOwn):
    """A saved prompt, inserted by typing `/name` in an empty message box; its `{{variables}}`
    are asked for first (`starting/prompt_text.py`)."""

    name = models.SlugField(
        max_length=50, help_text="Typed as /name: letters, digits, - and _ (e.g. summarize)."
    )
    text = models.TextField(help_text="{{name}} marks a variable, asked for when it is inserted.")

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="one_prompt_name_per_owner"),
            models.UniqueConstraint(
                fields=["name"],
                condition=models.Q(owner__isnull=True),
                name="one_shared_prompt_name",
            ),
        ]

    def __str__(self) -> str:
        return f"/{self.name}"


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


class ToolSwitch(models.Model):
    """An admin's switch for one tool (`chatapp/tools`), for every user: a tool without a row is
    on."""

    name = models.CharField(max_length=64, unique=True)
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "tool switches"

    def __str__(self) -> str:
        return f"{self.name} ({'on' if self.enabled else 'off'})"


class SharedVersion(models.Model):
    """One row whose token changes with every change to what processes keep in memory between
    requests (the tools, the group policies, the assistants, prompts and chat defaults:
    `chatapp.shared_cache`; the gateways: `chatapp.gateways.configs`), written in the
    transaction of the change."""

    ONE = 1
    token = models.CharField(max_length=32)

    def __str__(self) -> str:
        return f"Shared version {self.token}"

    @classmethod
    def current(cls) -> str:
        """The token; a database without the row (just made, or flushed) gets one with a new
        token, so that nothing is kept across a flush."""
        token = cls.objects.filter(pk=cls.ONE).values_list("token", flat=True).first()
        if token is None:
            row, _ = cls.objects.get_or_create(pk=cls.ONE, defaults={"token": uuid.uuid4().hex})
            token = row.token
        return token


class GroupPolicy(models.Model):
    """What the members of one group (`auth.Group`: made in the admin, or from a sign-in
    provider's claim) may use: the models and the tools whose names match one of its patterns
    (`access.group_policies` says how patterns match and how several groups combine). A user in
    no group with a policy may use everything; the group's money budgets are `SpendingLimit`s
    with `group` set."""

    group = models.OneToOneField(Group, on_delete=models.CASCADE, related_name="chat_policy")
    model_patterns = models.TextField(
        "models",
        blank=True,
        default="*",
        help_text="One pattern a line, matched against the model's ID and against "
        '"gateway name:model ID": openai/* (those models on any gateway), Numes:* (all of one '
        "gateway), *gpt-4o*. * and ? are wildcards. Empty: no model.",
    )
    tool_patterns = models.TextField(
        "tools",
        blank=True,
        default="*",
        help_text="One tool name or pattern a line (the names the tool switches list; * for "
        "all). Empty: no tool.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["group__name"]
        verbose_name = "group policy"
        verbose_name_plural = "group policies"

    def __str__(self) -> str:
        return f"Policy of {self.group}"


class GenerationQuerySet(models.QuerySet["Generation"]):
    """Generations are the cost ledger: deleting them is refused, whoever asks (a conversation
    or user deleted sets their keys to NULL instead). `ledger.fold` alone removes rows, through
    `fold_away`, in the transaction that writes their daily totals."""

    def delete(self) -> NoReturn:
        raise LedgerIsAppendOnly()

    def fold_away(self) -> int:
        """Delete these rows, whose totals the caller wrote in this same transaction."""
        deleted, _ = super().delete()
        return deleted


class Generation(models.Model):
    class Kind(models.TextChoices):
        CHAT = "chat", "chat answer"
        IMAGE = "image", "image generation"
        READ_ALOUD = "speech", "read aloud"
        TITLE = "title", "conversation title"

    class Status(models.TextChoices):
        STREAMING = "streaming"
        COMPLETED = "completed"
        CANCELLED = "cancelled"
        FAILED = "failed"
        INCOMPLETE = "incomplete"
        INTERRUPTED = "interrupted"

    class CostSource(models.TextChoices):
        STREAM = "stream", "usage chunk"
        RECORD = "record", "generation record"
        ESTIMATE = "estimate", "estimate"
        PENDING = "pending", "pending"
        UNAVAILABLE = "unavailable", "unavailable"
        NOT_BILLED = "not_billed", "not billed"

    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.CHAT)
    # Whose spend it is, kept on the row (and the name, as it was when the generation started) so
    # that totals per user stay whole when the conversation or the user is deleted.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="generations",
    )
    user_name = models.CharField(max_length=150, blank=True)
    # The answer it wrote (chat and image generations); a read aloud and a title have none of
    # their own. The text goes with its conversation; the generation stays (SET_NULL here and
    # below).
    message = models.OneToOneField(
        Message, on_delete=models.SET_NULL, null=True, blank=True, related_name="generation"
    )
    # The answer a read aloud read.
    read_aloud = models.ForeignKey(
        Message, on_delete=models.SET_NULL, null=True, blank=True, related_name="read_alouds"
    )
    # A turn that calls tools is several generations: round 1 answers the user's message, each
    # later one continues from the tool results of the round before.
    tool_round = models.PositiveSmallIntegerField(default=1)
    conversation = models.ForeignKey(
        Conversation,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="generations",
    )
    # PROTECT: a gateway with history is disabled, not deleted, so its totals stay whole.
    gateway = models.ForeignKey(
        Gateway, on_delete=models.PROTECT, null=True, blank=True, related_name="generations"
    )
    model = models.CharField(max_length=200)
    max_tokens = models.PositiveIntegerField(
        null=True, blank=True, help_text="The budget the request asked for (empty: the gateway's)."
    )
    # The dialect that served it (the gateway's, or detected from the stream): it decides whether
    # a generation record can be asked for, and how a missing cost is explained.
    dialect = models.CharField(max_length=16, blank=True)
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.STREAMING, db_index=True
    )
    upstream_id = models.CharField("generation ID", max_length=200, blank=True, db_index=True)
    request_id = models.CharField(max_length=200, blank=True)
    served_model = models.CharField(max_length=200, blank=True)
    finish_reason = models.CharField(max_length=64, blank=True)

    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    reasoning_tokens = models.PositiveIntegerField(null=True, blank=True)
    cached_tokens = models.PositiveIntegerField(null=True, blank=True)
    usage = models.JSONField(null=True, blank=True)

    cost = models.DecimalField(max_digits=30, decimal_places=15, null=True, blank=True)
    cost_unit = models.CharField(max_length=16, choices=CostUnit.choices, blank=True)
    cost_source = models.CharField(
        max_length=16, choices=CostSource.choices, default=CostSource.PENDING, db_index=True
    )
    # Why the cost is what it is when the gateway did not report it: the basis of an estimate,
    # or the reason none could be made ("tiny-3b streams report no usage and no price is ...").
    cost_note = models.CharField(max_length=300, blank=True)
    # The worst case reserved against spending limits when it started (`spending_limits`), in
    # its gateway's unit: prompt tokens counted plus its budget, at the model's price. None: no
    # limit applied, or no price was known.
    spend_ceiling = models.DecimalField(max_digits=30, decimal_places=15, null=True, blank=True)
    # The spending limit that cut this answer's `max_tokens` to what it had left, in words ("the
    # Interns group's spending limit"); "" when none did (`spending_limits.reserve`).
    budget_capped_by = models.CharField(max_length=200, blank=True)
    reconcile_attempts = models.PositiveSmallIntegerField(default=0)

    started_at = models.DateTimeField(auto_now_add=True)
    first_token_at = models.DateTimeField(null=True, blank=True)
    ttft_ms = models.PositiveIntegerField("time to first token (ms)", null=True, blank=True)
    thinking_ms = models.PositiveIntegerField(
        "thinking time (ms)",
        null=True,
        blank=True,
        help_text="How long the model reasoned before its answer began, ms.",
    )
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)

    # The channel of the process running it (its ticker's): Stop and snapshot requests go there.
    owner_channel = models.CharField(max_length=200, blank=True)
    last_seq = models.PositiveIntegerField(default=0)

    error_status = models.PositiveSmallIntegerField(null=True, blank=True)
    error_code = models.CharField(max_length=100, blank=True)
    error_type = models.CharField(max_length=100, blank=True)
    error_message = models.TextField(blank=True)
    retry_after = models.FloatField(null=True, blank=True)
    # `Completion.warnings` codes, e.g. "unread_parts": the stream carried parts we could not read.
    warnings = models.JSONField(default=list, blank=True)

    objects = GenerationQuerySet.as_manager()
    _counted: bool  # its cost was counted in the running totals when read (`from_db`)

    # The kinds that write no answer of their own (`message` is None): no new turn waits for
    # them, and the sweep interrupts them without telling any page.
    ANSWERLESS_KINDS = (Kind.READ_ALOUD, Kind.TITLE)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [
            models.Index(fields=["status", "heartbeat_at"]),
            models.Index(fields=["started_at", "cost_unit"]),
            models.Index(fields=["user", "started_at"]),
        ]

    def __str__(self) -> str:
        return f"{self.model} ({self.status})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self._state.adding and self.user_id is None and self.conversation_id is not None:
            owner = self.conversation.user if self.conversation else None
            if owner is not None:
                self.user = owner
        adding = self._state.adding
        if adding and self.user is not None and not self.user_name:
            self.user_name = self.user.get_username()
        # Counted in the running totals once, when its cost leaves `pending`, in the transaction
        # that writes it (`running_totals`). Unknown for a row read without its cost source.
        counted = getattr(self, "_counted", None if not adding else False)
        fields = kwargs.get("update_fields")
        settles = (
            counted is False
            and self.cost_source != self.CostSource.PENDING
            and (fields is None or "cost_source" in fields)
        )
        # A transaction of its own only when the caller has none: inside the caller's, a failed
        # save is the caller's to handle, as it was before totals were kept.
        alone = not transaction.get_connection(kwargs.get("using")).in_atomic_block
        with transaction.atomic(using=kwargs.get("using")) if alone else nullcontext():
            super().save(*args, **kwargs)
            if adding and self.user_id is not None:
                GenerationGroup.record(self)
            if settles:
                running_totals.count(self)
        if counted is not None:
            self._counted = self.cost_source != self.CostSource.PENDING

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise LedgerIsAppendOnly()

    @classmethod
    def from_db(cls, db: str | None, field_names: Any, values: Any, **kwargs: Any) -> Generation:
        row = super().from_db(db, field_names, values, **kwargs)
        if "cost_source" in field_names:
            row._counted = row.cost_source != cls.CostSource.PENDING
        return row

    @property
    def is_running(self) -> bool:
        return self.status == self.Status.STREAMING

    @property
    def answer(self) -> Message:
        """The answer this generation wrote (a chat answer or an image generation), or the one it
        read aloud. Not every row has one: a title generation writes only the conversation's
        title, and an answer deleted with its conversation leaves its generation behind; for
        those this raises `Message.DoesNotExist`. Only what renders an answer asks for it."""
        found = self.read_aloud if self.kind == self.Kind.READ_ALOUD else self.message
        if found is None:
            raise Message.DoesNotExist(f"generation {self.pk} has no answer")
        return found

    @staticmethod
    def silent_since(cutoff: datetime) -> models.Q:
        """Generations whose worker has not beaten since `cutoff` (or never, if it started
        before): the sweep interrupts those still streaming; no new turn waits for them."""
        return models.Q(heartbeat_at__lt=cutoff) | models.Q(
            heartbeat_at__isnull=True, started_at__lt=cutoff
        )

    @property
    def total_tokens(self) -> int | None:
        if self.prompt_tokens is None and self.completion_tokens is None:
            return None
        return (self.prompt_tokens or 0) + (self.completion_tokens or 0)


class ReadAloudAudio(models.Model):
    """The audio a read aloud received, kept so that playing it again costs nothing; it counts as
    completed only once the gateway's generation record confirms it (`Generation.status`)."""

    generation = models.OneToOneField(
        Generation, on_delete=models.CASCADE, related_name="read_aloud_audio"
    )
    media_type = models.CharField(max_length=100)
    data = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"Audio of generation {self.generation_id} ({self.media_type})"


class GenerationGroupQuerySet(models.QuerySet["GenerationGroup"]):
    """Part of the cost ledger, as generations are: never deleted."""

    def delete(self) -> NoReturn:
        raise LedgerIsAppendOnly()


class GenerationGroup(models.Model):
    """A group the generation's user belonged to when it started, and so the group whose spend
    it is: its budgets count it, and the cost history adds it to the group's row. Recorded with
    the generation (`Generation.save`), since memberships change; a user in two groups makes a
    row for each, so a generation counts once in each group's total (and the groups' totals can
    add up to more than all generations'). The group's name is kept, as a user's is, for when the
    group is deleted."""

    generation = models.ForeignKey(Generation, on_delete=models.CASCADE, related_name="group_links")
    group = models.ForeignKey(
        Group, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    group_name = models.CharField(max_length=150)

    objects = GenerationGroupQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["generation", "group"], name="one_link_per_group")
        ]
        indexes = [models.Index(fields=["group", "generation"])]

    def __str__(self) -> str:
        return f"Generation {self.generation_id} of {self.group_name}"

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise LedgerIsAppendOnly()

    @classmethod
    def record(cls, generation: Generation) -> None:
        """A row for each group `generation`'s user is in now (in its transaction)."""
        groups = Group.objects.filter(user=generation.user_id).values_list("pk", "name")
        cls.objects.bulk_create(
            cls(generation=generation, group_id=pk, group_name=name) for pk, name in groups
        )


class SpendingLimit(models.Model):
    """A budget an admin sets: at most `amount` in `unit` per `period` (`spending_limits` checks
    it before a generation starts, and while it runs). Its scope is one user, one gateway (all
    its users together), one group (its members together: the generations recorded as the
    group's, `GenerationGroup`), or, with none, every user who has no limit of their own in that
    unit and period."""

    class Period(models.TextChoices):
        DAY = "day", "a day"
        MONTH = "month", "a month"

    class UnknownPrice(models.TextChoices):
        ALLOW = "allow", "allow it"
        REFUSE = "refuse", "refuse it"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="spending_limits",
    )
    gateway = models.ForeignKey(
        Gateway, on_delete=models.CASCADE, null=True, blank=True, related_name="spending_limits"
    )
    group = models.ForeignKey(
        Group, on_delete=models.CASCADE, null=True, blank=True, related_name="spending_limits"
    )
    unit = models.CharField(max_length=16, choices=CostUnit.choices)
    period = models.CharField(max_length=8, choices=Period.choices, default=Period.MONTH)
    amount = models.DecimalField(max_digits=30, decimal_places=15)
    unknown_price = models.CharField(
        "when the price is unknown",
        max_length=8,
        choices=UnknownPrice.choices,
        default=UnknownPrice.ALLOW,
        help_text="What to do with a generation whose worst case cannot be priced in this unit "
        "(no price known for its model, another unit, an image or a read aloud).",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["gateway", "user", "unit", "period"]
        constraints = [
            models.CheckConstraint(
                condition=(
                    models.Q(user__isnull=True, gateway__isnull=True)
                    | models.Q(user__isnull=True, group__isnull=True)
                    | models.Q(gateway__isnull=True, group__isnull=True)
                ),
                name="spending_limit_one_scope",
            ),
            models.CheckConstraint(
                condition=models.Q(amount__gte=0), name="spending_limit_not_negative"
            ),
        ]

    def __str__(self) -> str:
        amount = f"{self.amount.normalize():f} {self.unit}"
        return f"{self.scope_label}: {amount} {self.get_period_display()}"

    @property
    def scope_label(self) -> str:
        if self.user_id is not None:
            return f"user {self.user}"
        if self.gateway_id is not None:
            return f"gateway {self.gateway}"
        if self.group_id is not None:
            return f"group {self.group}"
        return "every user"


class LedgerDay(models.Model):
    """Generations folded away by `manage.py fold_ledger` (`chatapp/costs/ledger.py`): one UTC day's
    generations of one user, gateway, model, kind, status, unit and cost source, counted and
    summed, so that every total reads the same once the rows themselves are gone.

    The cost sum is exact on both databases: its whole part, and its fraction in steps of 1e-15
    split at 1e-7 (`high`: steps // 10**8, `low`: steps % 10**8), the integers `costs/summary.py`
    adds on SQLite, where a decimal column is a 15-digit REAL.
    """

    day = models.DateField()
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    user_name = models.CharField(max_length=150, blank=True)
    gateway = models.ForeignKey(
        Gateway, on_delete=models.PROTECT, null=True, blank=True, related_name="ledger_days"
    )
    model = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Generation.Kind.choices)
    status = models.CharField(max_length=16, choices=Generation.Status.choices)
    cost_unit = models.CharField(max_length=16, choices=CostUnit.choices, blank=True)
    cost_source = models.CharField(max_length=16, choices=Generation.CostSource.choices)
    generations = models.PositiveIntegerField()
    priced = models.PositiveIntegerField(help_text="Generations with an amount.")
    prompt_tokens = models.BigIntegerField(default=0)
    completion_tokens = models.BigIntegerField(default=0)
    reasoning_tokens = models.BigIntegerField(default=0)
    cached_tokens = models.BigIntegerField(default=0)
    cost_whole = models.BigIntegerField(default=0)
    cost_high = models.BigIntegerField(default=0)
    cost_low = models.BigIntegerField(default=0)
    folded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-day", "-id"]
        indexes = [models.Index(fields=["day", "cost_unit"]), models.Index(fields=["user", "day"])]

    def __str__(self) -> str:
        return f"{self.day} {self.model}: {self.generations} generation(s)"

    @property
    def group_names(self) -> list[str]:
        """The groups its generations were spent by (all of them the same: `ledger.fold`)."""
        return sorted(link.group_name for link in self.group_links.all())

    @property
    def cost(self) -> Decimal:
        """The exact sum of the folded generations' costs, in `cost_unit`."""
        return running_totals.joined(self.cost_whole, self.cost_high, self.cost_low)

    @staticmethod
    def cost_parts(amount: Decimal) -> tuple[int, int, int]:
        """`amount` as (whole, high, low): the columns `cost` joins back (the running totals'
        split too: `running_totals.parts`)."""
        return running_totals.parts(amount)


class LedgerDayGroupQuerySet(models.QuerySet["LedgerDayGroup"]):
    """Part of the cost ledger, as daily totals are: never deleted."""

    def delete(self) -> NoReturn:
        raise LedgerIsAppendOnly()


class LedgerDayGroup(models.Model):
    """A group the generations folded into a daily total were recorded as spent by: their
    `GenerationGroup` rows, which are folded with them. Every generation of one daily total was
    recorded with the same groups (`ledger.fold` keys the totals by them too), so a group's
    budgets and cost history read the same before and after a fold."""

    ledger_day = models.ForeignKey(LedgerDay, on_delete=models.CASCADE, related_name="group_links")
    group = models.ForeignKey(
        Group, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    group_name = models.CharField(max_length=150)

    objects = LedgerDayGroupQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["group", "ledger_day"])]

    def __str__(self) -> str:
        return f"Daily total {self.ledger_day_id} of {self.group_name}"

    def delete(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise LedgerIsAppendOnly()


class Feedback(models.Model):
    """A user's thumbs up or down on an answer, with an optional comment: one per user and
    answer, changed in place. Kept with the answer's generation rather than its message, so that
    it outlives the conversation's text as the generation does, and the cost ledger can be
    filtered by it (what did the answers people disliked cost, per model); folding a
    generation away (`ledger.fold`) takes its feedback with it. A deleted user's stays, unnamed."""

    class Rating(models.TextChoices):
        UP = "up", "liked"
        DOWN = "down", "disliked"

    MAX_COMMENT = 2_000  # characters

    generation = models.ForeignKey(Generation, on_delete=models.CASCADE, related_name="feedback")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    rating = models.CharField(max_length=8, choices=Rating.choices)
    comment = models.TextField(blank=True, max_length=MAX_COMMENT)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "feedback"
        ordering = ["-updated_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["generation", "user"], name="one_feedback_per_user"),
        ]
        indexes = [models.Index(fields=["rating", "generation"])]

    def __str__(self) -> str:
        return f"{self.get_rating_display()} on generation {self.generation_id}"


# Models that live with the code that uses them (chatapp/accounts, chatapp/mcp, chatapp/costs);
# imported here so that Django finds them as the chat app's.
from chatapp.accounts.models import (  # noqa: E402, F401
    PendingApproval,
    ProviderGroupMembership,
    ProviderIdentity,
    SelfSignUp,
)
from chatapp.costs import running_totals  # noqa: E402
from chatapp.costs.running_totals import SpendTotal  # noqa: E402, F401
from chatapp.mcp.models import McpServer  # noqa: E402, F401
