"""Spending limits: a money budget per user, per gateway and for every user, that holds before the
money is spent.

A limit (`SpendingLimit`) allows `amount` in one cost unit per day or month, in the server's
`TIME_ZONE`. A user's own limit replaces the default ("every user") of the same unit and period
for them; a gateway's counts every user's generations through that gateway; a group's counts
the generations recorded as the group's (`GenerationGroup`: its members' since they joined), and
applies to its members beside their own. Units are never added together: a limit counts only
amounts in its unit.

Reservation, not read-then-write. When a generation starts (`reserve`, called where its row is
created, inside that transaction), its worst case (`Ceiling`: the prompt tokens counted from the
context at about 4 characters a token, as cost estimates count them, plus its `max_tokens`, or
`DEFAULT_CEILING_TOKENS` when none is set, at the model's price) is checked against what each
limit that applies has left: the settled costs of the period (the running totals,
`running_totals`: one statement whatever the history), plus the ceilings of generations
still running or whose cost is still pending, plus this one's. The limit rows are locked first
(`select_for_update`, in primary-key order), so two processes checking the same limit take turns
and the second sees the first's reservation; on SQLite every write transaction is `IMMEDIATE`
already, which serialises them the same way. The ceiling passed is stored on the generation
(`Generation.spend_ceiling`): the reservation is the row itself, and ends when its cost settles.
A priced chat answer whose full budget does not fit has its budget cut to what is left instead
of being refused (`reserve`).

A generation the limit cannot price in its unit (no price for the model, another unit, an image,
a read aloud, a transcription) follows the limit's `unknown_price` policy: refused, or allowed
while anything is left.

While an answer streams, its worker compares its cost so far (tokens so far at the model's price,
once per tick) with what it reserved; past it, the reservation is extended (`extend`) under the
same locks, and when the limits have nothing more to give the answer is stopped there, as Stop
stops it, with a note saying why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import transaction
from django.db.models import Exists, OuterRef, Q, Sum
from django.utils import timezone

from chatapp.costs.costing import CHARS_PER_TOKEN, counted_prompt_tokens
from chatapp.costs.models import Generation, GenerationGroup, SpendingLimit, SpendTotal
from chatapp.costs.token_budgets import SAFE_BUDGET
from chatapp.errors import ChatAppError
from chatapp.gateways import pricing
from chatapp.gateways.units import CostUnit, Money

if TYPE_CHECKING:
    from django.contrib.auth.models import User

__all__ = [
    "DEFAULT_CEILING_TOKENS",
    "MIN_ANSWER_TOKENS",
    "SPENDING_LIMIT",
    "UNWATCHED",
    "WARN_AT",
    "Ceiling",
    "SpendWatch",
    "SpendingLimitReached",
    "Standing",
    "any_apply",
    "applicable",
    "ceiling_for",
    "extend",
    "keep_refused",
    "period_bounds",
    "reserve",
    "standings",
    "standings_for",
]

# The completion tokens reserved for a generation that sets no `max_tokens`: what the Osmexo
# docs call a safe default budget for a reasoning model. An answer that goes past it extends its
# reservation while the limits have room (`extend`).
DEFAULT_CEILING_TOKENS = SAFE_BUDGET
# The smallest budget an answer is cut to rather than refused: fewer tokens are no answer.
MIN_ANSWER_TOKENS = 64
WARN_AT = Decimal("0.8")  # the share of a limit used at which the composer warns
SPENDING_LIMIT = "spending_limit"  # `Generation.error_type` of what a limit stopped
UNWATCHED = Decimal("Infinity")  # `extend`'s reservation for an answer no limit watches any more

Period = SpendingLimit.Period
STREAMING = Generation.Status.STREAMING
PENDING = Generation.CostSource.PENDING


class SpendingLimitReached(ChatAppError):
    """A generation would cross a spending limit (or cannot be priced under one that refuses
    what it cannot price); the message says what is left and when the period resets."""


# --- Periods ----------------------------------------------------------------------------------


def period_bounds(period: str, now: datetime | None = None) -> tuple[datetime, datetime]:
    """The current day or month, in the server's `TIME_ZONE`: its start, and when it resets."""
    local = timezone.localtime(now)
    first = local.date() if period == Period.DAY else local.date().replace(day=1)
    if period == Period.DAY:
        following = first + timedelta(days=1)
    else:
        following = (first.replace(day=28) + timedelta(days=4)).replace(day=1)
    return (
        timezone.make_aware(datetime.combine(first, time())),
        timezone.make_aware(datetime.combine(following, time())),
    )


def _period_words(period: str) -> str:
    return "today" if period == Period.DAY else "this month"


def _resets(resets: datetime) -> str:
    local = timezone.localtime(resets)
    return f"{local.day} {local:%B} at {local:%H:%M} {settings.TIME_ZONE}"


# --- What is used -----------------------------------------------------------------------------


def _counted(limit: SpendingLimit, user_pk: int | None) -> tuple[str, int] | None:
    """Whose spend a limit counts, as the running totals key it: its gateway's, its group's, or
    its user's (the default: `user_pk`'s)."""
    if limit.gateway_id is not None:
        return SpendTotal.Scope.GATEWAY, limit.gateway_id
    if limit.group_id is not None:
        return SpendTotal.Scope.GROUP, limit.group_id
    owner = limit.user_id if limit.user_id is not None else user_pk
    return None if owner is None else (SpendTotal.Scope.USER, owner)


def _running(scope: tuple[str, int], unit: str, since: datetime) -> Q:
    """The generations of `scope` still running or pending in `unit` since `since`."""
    kind, key = scope
    if kind == SpendTotal.Scope.GATEWAY:
        whose = Q(gateway_id=key)
    elif kind == SpendTotal.Scope.GROUP:
        whose = Q(Exists(GenerationGroup.objects.filter(generation=OuterRef("pk"), group_id=key)))
    else:
        whose = Q(user_id=key)
    return whose & Q(started_at__gte=since, gateway__cost_unit=unit)


def _used(limits: list[SpendingLimit], user_pk: int | None, now: datetime | None) -> list[Decimal]:
    """What each limit has used: the settled costs of its period in its unit (the running
    totals: one statement for all of them), plus the worst cases of its generations still
    running or pending (one more): a cost not known yet holds its place with its worst case.

    A final cost is written without the limits' lock, so on PostgreSQL one can commit between
    the two statements. They are read in the order that makes such a row count twice (the check
    refuses early), never nowhere: the reservations first."""
    scopes = [_counted(limit, user_pk) for limit in limits]
    starts = [period_bounds(limit.period, now)[0] for limit in limits]
    counted = [(i, scope) for i, scope in enumerate(scopes) if scope is not None]
    if not counted:
        return [Decimal(0) for _ in limits]
    # Worst cases, not amounts: the database's own sum will do (on SQLite, a REAL's).
    reserved = Generation.objects.filter(
        cost__isnull=True, cost_source=PENDING, spend_ceiling__isnull=False
    ).aggregate(
        **{
            f"l{i}": Sum("spend_ceiling", filter=_running(scope, limits[i].unit, starts[i]))
            for i, scope in counted
        }
    )
    wanted = Q()
    for i, (kind, key) in counted:
        wanted |= Q(
            scope=kind,
            scope_key=key,
            period=limits[i].period,
            start=starts[i].date(),
            unit=limits[i].unit,
        )
    settled: dict[tuple[str, int, str, date, str], Decimal] = {}
    for row in SpendTotal.objects.filter(wanted):
        found = (row.scope, row.scope_key, row.period, row.start, row.unit)
        settled[found] = settled.get(found, Decimal(0)) + row.amount
    used = [Decimal(0) for _ in limits]
    for i, (kind, key) in counted:
        limit = limits[i]
        amount = settled.get((kind, key, limit.period, starts[i].date(), limit.unit), Decimal(0))
        held = reserved[f"l{i}"]
        used[i] = amount + (Decimal(held) if held else Decimal(0))
    return used


@dataclass(frozen=True, slots=True)
class Standing:
    """Where one limit stands for one user (or, a gateway's or a group's, for all its users)."""

    limit: SpendingLimit
    used: Decimal
    start: datetime
    resets: datetime

    @property
    def left(self) -> Decimal:
        return max(Decimal(0), self.limit.amount - self.used)

    @property
    def unit(self) -> CostUnit:
        return CostUnit(self.limit.unit)

    @property
    def warn(self) -> bool:
        amount = self.limit.amount
        return self.used >= amount * WARN_AT if amount else True

    @property
    def scope_name(self) -> str:
        """The gateway's or the group's name; "" for the user's own (or the default)."""
        found = self.limit.gateway or self.limit.group
        return "" if found is None else found.name

    @property
    def whose(self) -> str:
        """Whose limit, so that a person knows which one to ask about: "the Interns group's",
        "the Numes gateway's", "your"."""
        if self.limit.group is not None:
            return f"the {self.limit.group.name} group's"
        if self.limit.gateway is not None:
            name = self.limit.gateway.name
            return f"the {name}'s" if name.lower().endswith("gateway") else f"the {name} gateway's"
        return "your"

    def summary(self) -> str:
        """'$3.20 of $10.00 left this month', 'Team Research: $120.00 of $500.00 left ...'."""
        left, amount = Money(self.left, self.unit), Money(self.limit.amount, self.unit)
        prefix = f"{self.scope_name}: " if self.scope_name else ""
        period = _period_words(self.limit.period)
        return f"{prefix}{left.rounded()} of {amount.rounded()} left {period}"

    def reset_words(self) -> str:
        return f"it resets on {_resets(self.resets)}"

    def warning(self) -> str:
        share = 100 if not self.limit.amount else math.floor(self.used * 100 / self.limit.amount)
        left = Money(self.left, self.unit)
        period = _period_words(self.limit.period)
        return (
            f"You have used {min(share, 100)}% of {self.whose} spending limit {period}: "
            f"{left.rounded()} left; {self.reset_words()}."
        )


def standings(
    limits: list[SpendingLimit], user_pk: int | None, now: datetime | None = None
) -> list[Standing]:
    """Where each of `limits` stands for `user_pk`: two statements for all of them."""
    used = _used(limits, user_pk, now)
    return [
        Standing(limit, spent, *period_bounds(limit.period, now))
        for limit, spent in zip(limits, used, strict=True)
    ]


def standing(limit: SpendingLimit, user_pk: int | None, now: datetime | None = None) -> Standing:
    return standings([limit], user_pk, now)[0]


# --- Which limits apply -----------------------------------------------------------------------


def _applicable_q(user_pk: int, gateway_pk: int | None) -> Q:
    # A subquery, not a join: a join through the group's members would repeat its row, and
    # PostgreSQL locks no DISTINCT.
    scope = (
        Q(user_id=user_pk)
        | Q(user__isnull=True, gateway__isnull=True, group__isnull=True)
        | Q(group__in=Group.objects.filter(user=user_pk).values("pk"))
    )
    if gateway_pk is not None:
        scope |= Q(gateway_id=gateway_pk)
    return scope


def _without_replaced(limits: list[SpendingLimit]) -> list[SpendingLimit]:
    """A user's own limit replaces the default of the same unit and period."""
    own = {(limit.unit, limit.period) for limit in limits if limit.user_id is not None}
    return [
        limit
        for limit in limits
        if limit.user_id is not None
        or limit.gateway_id is not None
        or limit.group_id is not None
        or (limit.unit, limit.period) not in own
    ]


def applicable(user_pk: int, gateway_pk: int | None, *, lock: bool = False) -> list[SpendingLimit]:
    """The limits a generation of `user_pk` through `gateway_pk` must fit, locked (in key
    order, so two checks never wait on each other crosswise) when `lock`."""
    rows = SpendingLimit.objects.filter(_applicable_q(user_pk, gateway_pk)).order_by("pk")
    if lock:
        rows = rows.select_for_update(of=("self",))  # PostgreSQL: not the gateway's outer join
    return _without_replaced(list(rows.select_related("gateway", "group")))


def any_apply(user_pk: int, gateway_pk: int | None) -> bool:
    return SpendingLimit.objects.filter(_applicable_q(user_pk, gateway_pk)).exists()


def standings_for(user: User, now: datetime | None = None) -> list[Standing]:
    """Where each limit that applies to `user` stands (its own, the default, every gateway's,
    each of their groups')."""
    scope = (
        Q(user_id=user.pk)
        | Q(user__isnull=True, group__isnull=True)
        | Q(group__in=Group.objects.filter(user=user.pk).values("pk"))
    )
    rows = SpendingLimit.objects.filter(scope).select_related("gateway", "group")
    return standings(_without_replaced(list(rows)), user.pk, now)


# --- The worst case ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ceiling:
    """A generation's worst-case cost: `amount` in `unit`, or None when it cannot be priced."""

    prompt_tokens: int
    completion_tokens: int
    unit: CostUnit
    prompt_price: Decimal | None = None
    completion_price: Decimal | None = None
    unpriced: str = ""
    """Why it cannot be priced, in words ("no price is known for emulator/chat")."""

    @property
    def amount(self) -> Decimal | None:
        if self.prompt_price is None or self.completion_price is None:
            return None
        return self.cost_of(self.completion_tokens)

    def cost_of(self, completion_tokens: int) -> Decimal:
        """The prompt and `completion_tokens` at the model's price (priced ceilings only)."""
        assert self.prompt_price is not None
        assert self.completion_price is not None
        return self.prompt_tokens * self.prompt_price + completion_tokens * self.completion_price


def ceiling_for(
    gateway_pk: int | None,
    cost_unit: str,
    model: str,
    messages: list[dict[str, Any]],
    max_tokens: int | None,
    kind: str = Generation.Kind.CHAT,
) -> Ceiling:
    """The worst case of a generation on gateway `gateway_pk` (billing in `cost_unit`) sent
    `messages`, with `max_tokens` as its budget (None: `DEFAULT_CEILING_TOKENS`). An embedding
    makes no completion: its worst case is its input alone."""
    unit = CostUnit(cost_unit) if cost_unit in CostUnit.values else CostUnit.CREDITS
    budget = 0 if kind == Generation.Kind.EMBEDDING else max_tokens or DEFAULT_CEILING_TOKENS
    base = Ceiling(counted_prompt_tokens(messages), budget, unit)
    if kind == Generation.Kind.IMAGE:
        return _unpriced(base, "images are not priced here")
    if kind == Generation.Kind.READ_ALOUD:
        return _unpriced(base, "read alouds are not priced here")
    if kind == Generation.Kind.TRANSCRIPTION:
        return _unpriced(base, "voice input is not priced here")
    price = pricing.price_for(gateway_pk, model)
    if price is None:
        return _unpriced(base, f"no price is known for {model.partition('?')[0]}")
    return Ceiling(base.prompt_tokens, base.completion_tokens, unit, price.prompt, price.completion)


def _unpriced(base: Ceiling, why: str) -> Ceiling:
    return Ceiling(base.prompt_tokens, base.completion_tokens, base.unit, unpriced=why)


# --- Reserving --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SpendWatch:
    """What a running chat answer's worker needs to keep within its limits (`Job.spend`)."""

    ceiling: Ceiling
    reserved: Decimal
    limit_pks: tuple[int, ...]
    capped_by: str = ""
    """The limit that cut the answer's budget to what it had left ("the Interns group's
    spending limit"); "" when none did."""

    def cost_so_far(self, characters: int) -> Decimal:
        return self.ceiling.cost_of(math.ceil(characters / CHARS_PER_TOKEN))


def _used_up(standing: Standing) -> str:
    amount = Money(standing.limit.amount, standing.unit).rounded()
    period = "a day" if standing.limit.period == Period.DAY else "a month"
    return (
        f"{_capitalized(standing.whose)} spending limit of {amount} {period} is used up; "
        f"{standing.reset_words()}."
    )


def _refusal(standing: Standing, ceiling: Ceiling, what: str) -> str:
    left = Money(standing.left, standing.unit).rounded()
    amount = Money(standing.limit.amount, standing.unit).rounded()
    period = "a day" if standing.limit.period == Period.DAY else "a month"
    if standing.left <= 0:
        return _used_up(standing)
    cost = ceiling.amount
    if cost is None:
        return (
            f"This {what} cannot be priced ({ceiling.unpriced}), and {standing.whose} spending "
            f"limit of {amount} {period} refuses what it cannot price; {left} is left, and "
            f"{standing.reset_words()}."
        )
    if what == "answer" and ceiling.completion_tokens > MIN_ANSWER_TOKENS:  # not cut: `reserve`
        short = Money(ceiling.cost_of(MIN_ANSWER_TOKENS), ceiling.unit).rounded()
        return (
            f"Even a short answer ({MIN_ANSWER_TOKENS} tokens) to this conversation would cost "
            f"about {short}, more than the {left} left of {standing.whose} spending limit of "
            f"{amount} {period}; {standing.reset_words()}."
        )
    return (
        f"This {what} could cost up to {Money(cost, ceiling.unit).rounded()}, more than the "
        f"{left} left of {standing.whose} spending limit of {amount} {period}; "
        f"{standing.reset_words()}."
    )


def _capitalized(text: str) -> str:
    return text[:1].upper() + text[1:]


_WHAT = {
    Generation.Kind.CHAT: "answer",
    Generation.Kind.IMAGE: "image generation",
    Generation.Kind.READ_ALOUD: "read aloud",
    Generation.Kind.TITLE: "title",
    Generation.Kind.TRANSCRIPTION: "transcription",
    Generation.Kind.EMBEDDING: "embedding",
}


def check_not_used_up(user_pk: int, gateway_pk: int | None, unit: str) -> None:
    """`SpendingLimitReached` when a limit in `unit` (the gateway's) that applies to the user's
    generations on gateway `gateway_pk` has nothing left, which `reserve` refuses whatever the
    generation costs: said before anything costly is done for one (its files read). Unlocked:
    `reserve` still decides for what passes."""
    limits = applicable(user_pk, gateway_pk)
    for state in standings(limits, user_pk) if limits else ():
        if state.limit.unit == unit and state.left <= 0:
            raise SpendingLimitReached(_used_up(state))


def _affordable(ceiling: Ceiling, state: Standing) -> int:
    """The completion tokens what `state` has left pays for after the prompt, at the price of
    `ceiling` (a priced one, in the limit's unit); -1 when the prompt alone is too much."""
    assert ceiling.prompt_price is not None
    assert ceiling.completion_price is not None
    room = state.limit.amount - state.used - ceiling.prompt_tokens * ceiling.prompt_price
    if room < 0:
        return -1
    if ceiling.completion_price <= 0:
        return ceiling.completion_tokens
    return min(ceiling.completion_tokens, math.floor(room / ceiling.completion_price))


def reserve(
    user_pk: int, gateway_pk: int | None, ceiling: Ceiling, kind: str = Generation.Kind.CHAT
) -> SpendWatch | None:
    """Check a generation's `ceiling` against every limit that applies, under their locks (call
    inside the transaction that creates its row, and store `reserved` on it as its
    `spend_ceiling`); `SpendingLimitReached` when one would be crossed. None: no limit applies.

    A priced chat answer whose worst case would cross a limit that still has room for
    `MIN_ANSWER_TOKENS` is not refused: its budget is cut to what the tightest limit affords
    (`SpendWatch.ceiling.completion_tokens`, sent upstream as its `max_tokens`; `capped_by`
    names the limit, which the answer's note says when it is cut there). Reserving the full
    budget refused every answer under a small limit while the sidebar said most of it was left
    (#45)."""
    limits = applicable(user_pk, gateway_pk, lock=True)
    if not limits:
        return None
    what = _WHAT.get(Generation.Kind(kind), "answer")
    cost = ceiling.amount
    watched: list[Standing] = []
    over: list[Standing] = []
    for state in standings(limits, user_pk):
        limit = state.limit
        if cost is None or limit.unit != ceiling.unit:
            refuses = limit.unknown_price == SpendingLimit.UnknownPrice.REFUSE
            if refuses or (limit.unit == ceiling.unit and state.left <= 0):
                raise SpendingLimitReached(_refusal(state, ceiling, what))
            continue
        if state.used + cost > limit.amount:
            over.append(state)
        watched.append(state)
    if cost is None or not watched:
        return None
    capped_by = ""
    if over:
        tightest = min(over, key=lambda state: _affordable(ceiling, state))
        tokens = _affordable(ceiling, tightest)
        if kind != Generation.Kind.CHAT or tokens < MIN_ANSWER_TOKENS:
            raise SpendingLimitReached(_refusal(tightest, ceiling, what))
        ceiling = replace(ceiling, completion_tokens=tokens)
        cost = ceiling.cost_of(tokens)
        capped_by = f"{tightest.whose} spending limit"
    return SpendWatch(ceiling, cost, tuple(state.limit.pk for state in watched), capped_by)


def extend(
    generation_pk: int, user_pk: int, watch: SpendWatch, cost_so_far: Decimal
) -> Decimal | None:
    """A larger reservation for `user_pk`'s running answer whose cost so far passed what it
    reserved: twice as much, or what its limits have left if less, stored on its row; None when
    they have nothing left beyond its cost so far (the answer is to be stopped); `UNWATCHED`
    when its limits were all deleted since it started (it runs on, as if none had applied)."""
    with transaction.atomic():
        limits = list(
            SpendingLimit.objects.select_for_update().filter(pk__in=watch.limit_pks).order_by("pk")
        )
        if not limits:
            return UNWATCHED
        mine = (
            Generation.objects.filter(pk=generation_pk, status=STREAMING)
            .values_list("spend_ceiling", flat=True)
            .first()
        ) or Decimal(0)
        room: Decimal | None = None
        for state in standings(limits, user_pk):
            free = state.limit.amount - (state.used - mine)
            room = free if room is None else min(room, free)
        if room is None or room <= cost_so_far:
            return None
        larger = min(room, max(2 * mine, 2 * cost_so_far))
        Generation.objects.filter(pk=generation_pk, status=STREAMING).update(spend_ceiling=larger)
        return larger


def stop_note(watch: SpendWatch, user_pk: int) -> str:
    """Why an answer was stopped at its limit: the first of its limits with nothing left."""
    limits = SpendingLimit.objects.filter(pk__in=watch.limit_pks).select_related("gateway", "group")
    states = standings(list(limits), user_pk)
    tightest = min(states, key=lambda state: state.left, default=None)
    if tightest is None:
        return "This answer reached a spending limit."
    amount = Money(tightest.limit.amount, tightest.unit)
    return (
        f"this answer reached {tightest.whose} spending limit of {amount.rounded()} "
        f"{'a day' if tightest.limit.period == Period.DAY else 'a month'}; "
        f"{tightest.reset_words()}."
    )


def keep_refused(row: dict[str, Any], refused: SpendingLimitReached) -> Generation:
    """A generation a limit refused before it began, kept with the limit's words and not billed,
    so that the page that asked can say why (a read aloud's player, voice input) and the ledger
    shows the refusal. `row`: its fields as it would have started."""
    return Generation.objects.create(
        **row,
        status=Generation.Status.FAILED,
        finished_at=timezone.now(),
        cost_source=Generation.CostSource.NOT_BILLED,
        cost_note="refused before it began: over a spending limit",
        error_type=SPENDING_LIMIT,
        error_message=str(refused),
    )
