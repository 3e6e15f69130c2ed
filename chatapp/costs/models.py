"""The cost ledger's rows: a generation (`Generation`, one upstream request and what it cost),
the groups it was spent by (`GenerationGroup`), the daily totals folded generations become
(`LedgerDay`, `LedgerDayGroup`), the running totals kept beside them (`SpendTotal`), the budgets
an admin sets (`SpendingLimit`) and a user's feedback on an answer, kept with its generation
(`Feedback`). Registered by `chatapp.models` (app label `chatapp`).

Money facts are never deleted: every queryset and row here refuses `delete()`, but for
`ledger.fold`'s `fold_away`. A generation names its conversation and message by the app's model
names ("chatapp.Message"), not by import: conversations sit above costs.
"""

from __future__ import annotations

from contextlib import nullcontext
from datetime import datetime
from decimal import Decimal
from typing import Any, NoReturn

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models, transaction

from chatapp.costs import running_totals
from chatapp.errors import LedgerIsAppendOnly
from chatapp.gateways.models import Gateway
from chatapp.gateways.units import CostUnit


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
        TRANSCRIPTION = "transcription", "voice input"
        EMBEDDING = "embedding", "embedding"

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
        "chatapp.Message",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="generation",
    )
    # The answer a read aloud read.
    read_aloud = models.ForeignKey(
        "chatapp.Message",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="read_alouds",
    )
    # A turn that calls tools is several generations: round 1 answers the user's message, each
    # later one continues from the tool results of the round before.
    tool_round = models.PositiveSmallIntegerField(default=1)
    conversation = models.ForeignKey(
        "chatapp.Conversation",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="generations",
    )
    # An embedding's (`knowledge.embedding`): the collection whose documents it embedded, or the
    # user's message whose question it embedded for retrieval (with `conversation`). SET_NULL: a
    # deleted collection or message leaves its cost on the ledger.
    collection = models.ForeignKey(
        "chatapp.Collection",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="generations",
    )
    question = models.ForeignKey(
        "chatapp.Message",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="question_embeddings",
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
    # What the answer drew on: the passages retrieved from the collections and files chosen for
    # it, numbered as its context quoted them (`conversations/knowledge_context.py`: file, page
    # or heading, text, score). A copy, so a file removed later leaves the answer's sources.
    passages = models.JSONField(default=list, blank=True)

    objects = GenerationQuerySet.as_manager()
    _counted: bool  # its cost was counted in the running totals when read (`from_db`)

    # The kinds that write no answer of their own (`message` is None): no new turn waits for
    # them, and the sweep interrupts them without telling any page.
    ANSWERLESS_KINDS = (Kind.READ_ALOUD, Kind.TITLE, Kind.TRANSCRIPTION, Kind.EMBEDDING)

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


class SpendTotal(models.Model):
    """One period's settled costs of one user, group or gateway, through one gateway, in one
    unit ("" for generations without an amount)."""

    class Scope(models.TextChoices):
        USER = "user"
        GROUP = "group"
        GATEWAY = "gateway"

    class Period(models.TextChoices):  # `SpendingLimit.Period`'s values
        DAY = "day"
        MONTH = "month"

    scope = models.CharField(max_length=8, choices=Scope.choices)
    # The user's, group's or gateway's key. No foreign key: a total, like the ledger, outlives
    # what it counts.
    scope_key = models.BigIntegerField()
    period = models.CharField(max_length=8, choices=Period.choices)
    start = models.DateField(help_text="The period's first day, in the server's TIME_ZONE.")
    gateway_key = models.BigIntegerField(help_text="The gateway's key; 0: none.")
    unit = models.CharField(max_length=16, blank=True)
    priced = models.BigIntegerField(default=0, help_text="Generations with an amount.")
    unpriced = models.BigIntegerField(default=0, help_text="Without an amount, not billed aside.")
    not_billed = models.BigIntegerField(default=0)
    cost_whole = models.BigIntegerField(default=0)
    cost_high = models.BigIntegerField(default=0)
    cost_low = models.BigIntegerField(default=0)
    estimated_whole = models.BigIntegerField(default=0)
    estimated_high = models.BigIntegerField(default=0)
    estimated_low = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["scope", "scope_key", "period", "start", "gateway_key", "unit"],
                name="one_spend_total_per_key",
            )
        ]

    def __str__(self) -> str:
        return f"{self.scope} {self.scope_key} {self.period} of {self.start}: {self.unit}"

    @property
    def amount(self) -> Decimal:
        return running_totals.joined(self.cost_whole, self.cost_high, self.cost_low)

    @property
    def estimated(self) -> Decimal:
        return running_totals.joined(self.estimated_whole, self.estimated_high, self.estimated_low)
