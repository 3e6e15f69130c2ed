"""The cost ledger in the admin: generations read-only, with the filtered rows' totals per unit,
the cost summary page (per day, model, user, gateway and user group, and a chart) and the CSV
export.

Generations are the record of what a gateway billed, so no one adds, edits or deletes them here
(no permission grants it; `manage.py fold_ledger` is retention's one way). The cost summary and
the CSV export are views of `GenerationAdmin`: they build the same `ChangeList` the list does, so
they take the same filters and search, and a link between the three keeps its query string. The
daily totals that retention folded generations into (`LedgerDay`) are filtered the same way and
counted in all three: every filter is on a field both tables have (a group on the groups both
record), a date range on their day; feedback (`FeedbackGiven`), which folded rows no longer have,
leaves them out when it is chosen.
"""

from __future__ import annotations

import copy
import datetime
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from django.contrib import admin, messages
from django.contrib.admin.options import IncorrectLookupParameters
from django.contrib.admin.views.main import ChangeList
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.core.handlers.asgi import ASGIRequest
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseBase,
    HttpResponseRedirect,
    QueryDict,
)
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.text import Truncator, smart_split, unescape_string_literal

from chatapp.costs import chart as cost_chart
from chatapp.costs import csv_file, group_totals
from chatapp.costs import summary as cost_summary
from chatapp.costs.admin.amounts import trimmed
from chatapp.costs.models import Feedback, Generation, GenerationGroup, LedgerDay, LedgerDayGroup
from chatapp.costs.summary import DELETED_USER, GroupTotals
from chatapp.gateways.units import CostUnit, Money
from chatapp.knowledge.models import Collection

if TYPE_CHECKING:  # generic in django-stubs only: Django's admin classes are not subscriptable
    _GenerationAdmin = admin.ModelAdmin[Generation]
    _LedgerDayAdmin = admin.ModelAdmin[LedgerDay]
else:
    _GenerationAdmin = _LedgerDayAdmin = admin.ModelAdmin

SUMMARY_DAYS = 30  # the summary's range when none is chosen
SERIES_VAR = "series"  # the summary's own parameter, not a filter


def _day(text: str | None) -> datetime.date | None:
    return datetime.date.fromisoformat(text) if text else None


def _midnight(day: datetime.date) -> datetime.datetime:
    return datetime.datetime.combine(day, datetime.time.min, tzinfo=datetime.UTC)


class StartedBetween(admin.ListFilter):
    """Generations started from one UTC day to another, both included; either may be open."""

    title = "date range (UTC)"
    template = "admin/chatapp/generation/date_range_filter.html"
    parameters = ("started_from", "started_to")

    def __init__(
        self, request: HttpRequest, params: dict[str, list[str]], model: Any, model_admin: Any
    ) -> None:
        super().__init__(request, params, model, model_admin)
        for name in self.parameters:
            if name in params:
                self.used_parameters[name] = params.pop(name)[-1]
        try:
            self.start = _day(self.value("started_from"))
            self.end = _day(self.value("started_to"))
        except ValueError as error:
            raise IncorrectLookupParameters(error) from error

    def value(self, name: str) -> str:
        return str(self.used_parameters.get(name, ""))

    def has_output(self) -> bool:
        return True

    def expected_parameters(self) -> list[str | None]:
        return list(self.parameters)

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if queryset.model is LedgerDay:
            return self.days(queryset)
        if self.start:
            queryset = queryset.filter(started_at__gte=_midnight(self.start))
        if self.end:
            queryset = queryset.filter(started_at__lt=_midnight(self.end + datetime.timedelta(1)))
        return queryset

    def days(self, queryset: QuerySet[LedgerDay]) -> QuerySet[LedgerDay]:
        if self.start:
            queryset = queryset.filter(day__gte=self.start)
        if self.end:
            queryset = queryset.filter(day__lte=self.end)
        return queryset

    def choices(self, changelist: ChangeList) -> Any:
        yield {
            "start": self.value("started_from"),
            "end": self.value("started_to"),
            # The form replaces the query string: it carries the other filters along.
            "kept": [
                (name, value)
                for name, values in changelist.filter_params.items()
                if name not in self.parameters
                for value in values
            ],
            "clear": changelist.get_query_string(remove=list(self.parameters)),
        }


class DeletedUserName(admin.ListFilter):
    """The generations of a deleted user, by the name kept on them (the summary's per-user
    links); not shown in the sidebar, where the user filter's "-" lists every deleted user."""

    title = "deleted user"
    template = "admin/chatapp/generation/hidden_filter.html"
    parameter = "user_name"

    def __init__(
        self, request: HttpRequest, params: dict[str, list[str]], model: Any, model_admin: Any
    ) -> None:
        super().__init__(request, params, model, model_admin)
        if self.parameter in params:
            self.used_parameters[self.parameter] = params.pop(self.parameter)[-1]

    def has_output(self) -> bool:
        return True  # else the changelist would not apply it; its template shows nothing

    def expected_parameters(self) -> list[str | None]:
        return [self.parameter]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        name = self.used_parameters.get(self.parameter)
        if name is None:
            return queryset
        return queryset.filter(user__isnull=True, user_name=name)

    def choices(self, changelist: ChangeList) -> Any:
        return ()


class FeedbackGiven(admin.SimpleListFilter):
    """Generations by what their users said of the answer (`Feedback`): with the summary's per
    model table, what the answers people disliked cost. Folded generations' daily totals kept no
    feedback, so a choice here leaves them out."""

    title = "feedback"
    parameter_name = "feedback"
    _CHOICES = {
        "down": ("disliked", Q(rating=Feedback.Rating.DOWN)),
        "up": ("liked", Q(rating=Feedback.Rating.UP)),
        "comment": ("with a comment", ~Q(comment="")),
        "any": ("any", Q()),
    }

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(key, label) for key, (label, _) in self._CHOICES.items()] + [("none", "none")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value is None:
            return queryset
        if queryset.model is LedgerDay:
            # No row meets it, yet it is SQL: the summary's statement is built from its SQL,
            # which `none()` would not give.
            return queryset.filter(pk__isnull=True)
        if value == "none":
            return queryset.filter(~Exists(Feedback.objects.filter(generation=OuterRef("pk"))))
        _, only = self._CHOICES.get(value, ("", None))
        if only is None:
            raise IncorrectLookupParameters(f"not a feedback choice: {value!r}")
        given = Feedback.objects.filter(only, generation=OuterRef("pk"))
        return queryset.filter(Exists(given))


class EmbeddedCollection(admin.SimpleListFilter):
    """The embeddings of a knowledge collection's documents (`Generation.collection`): what
    indexing it cost. Folded daily totals kept no collection, so a choice here leaves them out,
    as feedback's does."""

    title = "knowledge collection"
    parameter_name = "collection"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        embedded = Collection.objects.filter(
            Exists(Generation.objects.filter(collection=OuterRef("pk")))
        ).select_related("owner")
        return [
            (str(row.pk), f"{row.name} ({row.owner.get_username() if row.owner else 'shared'})")
            for row in embedded
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value is None:
            return queryset
        if not value.isdigit():
            raise IncorrectLookupParameters(f"No collection {value!r}.")
        if queryset.model is LedgerDay:
            return queryset.filter(pk__isnull=True)  # as `FeedbackGiven`'s: SQL, and no row
        return queryset.filter(collection_id=int(value))


class RecordedGroup(admin.SimpleListFilter):
    """The generations recorded as a user group's (`GenerationGroup`: the groups their user was
    in when they started), or of no group; a deleted group's by the name kept (the summary's
    per-group links); daily totals by their groups (`LedgerDayGroup`), alike."""

    title = "user group"
    parameter_name = "group"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        named = [(str(pk), name) for pk, name in Group.objects.values_list("pk", "name")]
        return [*named, (group_totals.NO_GROUP, "(no group)")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        if value is None:
            return queryset
        if value == group_totals.NO_GROUP:
            return queryset.filter(group_links__isnull=True)
        links, of = (
            (LedgerDayGroup.objects, "ledger_day_id")
            if queryset.model is LedgerDay
            else (GenerationGroup.objects, "generation_id")
        )
        if value.startswith(group_totals.DELETED_GROUP):
            name = value.removeprefix(group_totals.DELETED_GROUP)
            found = links.filter(group__isnull=True, group_name=name)
        elif value.isdigit():
            found = links.filter(group_id=int(value))
        else:
            raise IncorrectLookupParameters(f"No group {value!r}.")
        return queryset.filter(pk__in=found.values(of))


def _user_shown(user: Any, kept_name: str) -> str:
    """The user's name now, or the name kept on the row when the user was deleted."""
    return user.get_username() if user is not None else f"{kept_name} (deleted)"


@dataclass(frozen=True, slots=True)
class _Table:
    caption: str
    heading: str
    rows: list[tuple[GroupTotals, str]]  # a group and the list filtered to it


@admin.register(Generation)
class GenerationAdmin(_GenerationAdmin):
    list_display = (
        "started_at",
        "user_shown",
        "gateway",
        "model",
        "kind",
        "what",
        "status",
        "feedback_listed",
        "prompt_tokens",
        "completion_tokens",
        "reasoning_tokens",
        "cached_tokens",
        "cost_shown",
        "cost_source",
        "ttft_ms",
        "duration",
        "conversation_link",
    )
    list_filter = (
        StartedBetween,
        "user",
        DeletedUserName,
        "gateway",
        "model",
        "kind",
        "status",
        "cost_source",
        "cost_unit",
        FeedbackGiven,
        RecordedGroup,
        EmbeddedCollection,
    )
    search_fields = ("upstream_id", "request_id", "user__username", "user_name")
    search_help_text = "Generation ID, request ID or user name."
    list_select_related = ("user", "gateway")
    # Rows are inserted as they start, so the key's order is the time order: the database reads
    # the newest rows off the table (or a filter's index) and stops at a page, where ordering by
    # started_at, id would sort every matching row first.
    ordering = ("-pk",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Generation | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Generation | None = None) -> bool:
        return False  # the ledger is append-only (also refused by the model itself)

    _TRIMMED: ClassVar[dict[str, str]] = {"cost": "cost_stored", "spend_ceiling": "ceiling_stored"}

    def get_fields(self, request: HttpRequest, obj: Generation | None = None) -> Any:
        # The view page: the amount as an amount, beside the exact stored decimal (trimmed).
        shown = {"cost_shown", "feedback_given", *self._TRIMMED.values()}
        fields = [name for name in super().get_fields(request, obj) if name not in shown]
        at = fields.index("cost")
        fields = [*fields[:at], "cost_shown", *fields[at:], "feedback_given"]
        return [self._TRIMMED.get(name, name) if isinstance(name, str) else name for name in fields]

    def get_readonly_fields(self, request: HttpRequest, obj: Generation | None = None) -> Any:
        return (
            *super().get_readonly_fields(request, obj),
            "cost_shown",
            "feedback_given",
            *self._TRIMMED.values(),
        )

    @admin.display(description="cost (stored)")
    def cost_stored(self, obj: Generation) -> str:
        return trimmed(obj.cost)

    @admin.display(description="spend ceiling")
    def ceiling_stored(self, obj: Generation) -> str:
        return trimmed(obj.spend_ceiling)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Generation]:
        # The page's rows' feedback in one query (the list's column), not one per row.
        return super().get_queryset(request).prefetch_related("feedback")

    @admin.display(description="feedback")
    def feedback_listed(self, obj: Generation) -> str:
        """Each rating on the answer, with the start of its comment."""
        return (
            format_html_join(
                mark_safe("<br>"),
                "{}{}",
                (
                    (item.get_rating_display(), f": {Truncator(item.comment).chars(60)}")
                    if item.comment
                    else (item.get_rating_display(), "")
                    for item in obj.feedback.all()
                ),
            )
            or "-"
        )

    @admin.display(description="feedback")
    def feedback_given(self, obj: Generation) -> str:
        """Each rating on the answer, by whom, with its whole comment."""
        return (
            format_html_join(
                mark_safe("<br>"),
                "{} by {}{}",
                (
                    (
                        item.get_rating_display(),
                        item.user.get_username() if item.user else "a deleted user",
                        f": {item.comment}" if item.comment else "",
                    )
                    for item in obj.feedback.all()
                ),
            )
            or "-"
        )

    @admin.display(description="user", ordering="user_name")
    def user_shown(self, obj: Generation) -> str:
        return _user_shown(obj.user, obj.user_name)

    @admin.display(description="for")
    def what(self, obj: Generation) -> str:
        """The answer it wrote, or read aloud, or what it embedded (by key: no join for the
        page's rows)."""
        if obj.kind == Generation.Kind.EMBEDDING:
            if obj.collection_id is not None:
                return f"Documents of collection #{obj.collection_id}"
            if obj.question_id is not None:
                return f"Question of message #{obj.question_id}"
            return "Embedding of a deleted collection or question"
        if obj.kind == Generation.Kind.READ_ALOUD:
            if obj.read_aloud_id is None:
                return "Read aloud of a deleted answer"
            return f"Read aloud of answer #{obj.read_aloud_id}"
        if obj.kind == Generation.Kind.TRANSCRIPTION:
            return "Voice input"
        if not obj.message_id:
            return "Deleted answer"
        if obj.tool_round > 1:  # a turn that calls tools: each round is a generation of its own
            return f"Answer #{obj.message_id}, tool round {obj.tool_round}"
        return f"Answer #{obj.message_id}"

    @admin.display(description="cost", ordering="cost")
    def cost_shown(self, obj: Generation) -> str:
        if obj.cost is None or obj.cost_unit not in CostUnit.values:
            return "-"
        return str(Money(obj.cost, CostUnit(obj.cost_unit)))

    @admin.display(description="duration", ordering="finished_at")
    def duration(self, obj: Generation) -> str:
        if obj.finished_at is None:
            return "-"
        return f"{(obj.finished_at - obj.started_at).total_seconds():.1f} s"

    @admin.display(description="conversation", ordering="conversation_id")
    def conversation_link(self, obj: Generation) -> str:
        if obj.conversation_id is None:
            # A transcription made before its chat began has none, nor a collection's documents,
            # embedded in no conversation; any other's was deleted.
            none = obj.kind == Generation.Kind.TRANSCRIPTION or obj.collection_id is not None
            return "-" if none else "deleted"
        url = reverse("admin:chatapp_conversation_change", args=[obj.conversation_id])
        return format_html('<a href="{}">#{}</a>', url, obj.conversation_id)

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view
        return [
            path("summary/", view(self.summary_view), name="chatapp_generation_summary"),
            path("export.csv", view(self.export_view), name="chatapp_generation_export"),
            *super().get_urls(),
        ]

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        response = super().changelist_view(request, extra_context)
        context = getattr(response, "context_data", None)
        if context and "cl" in context:  # not a redirect: the filtered rows' totals
            changelist = context["cl"]
            context["cost_totals"] = cost_summary.totals(
                changelist.queryset, folded=self._folded(request, changelist)
            )
            context["cost_query"] = _without_page(request.GET).urlencode()
        return response

    def _changelist(self, request: HttpRequest, default_range: bool) -> ChangeList:
        """The list's `ChangeList` for `request`'s filters (and the summary's default range)."""
        params = _without_page(request.GET)
        params.pop(SERIES_VAR, None)
        if default_range and not any(name in params for name in StartedBetween.parameters):
            today = timezone.now().astimezone(datetime.UTC).date()
            params["started_from"] = (today - datetime.timedelta(SUMMARY_DAYS - 1)).isoformat()
            params["started_to"] = today.isoformat()
        filtered = copy.copy(request)
        filtered.GET = QueryDict(params.urlencode())
        return self.get_changelist_instance(filtered)

    def _folded(self, request: HttpRequest, changelist: ChangeList) -> QuerySet[LedgerDay]:
        """The daily totals of folded generations that `changelist`'s filters and search keep:
        the same filters (their fields are on both tables); a search can only match a name."""
        folded = LedgerDay.objects.all()
        for spec in changelist.filter_specs:
            filtered = spec.queryset(request, folded)
            if filtered is not None:
                folded = filtered
        for term in smart_split(changelist.query):
            if term.startswith(('"', "'")) and term[0] == term[-1]:
                term = unescape_string_literal(term)
            folded = folded.filter(Q(user__username__icontains=term) | Q(user_name__icontains=term))
        return folded

    def summary_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            changelist = self._changelist(request, default_range=True)
        except IncorrectLookupParameters:
            messages.error(request, "Those filters are not valid; showing the default range.")
            return HttpResponseRedirect(reverse("admin:chatapp_generation_summary"))
        series = request.GET.get(SERIES_VAR, "")
        by_model, by_group = series == "model", series == "group"
        folded = self._folded(request, changelist)
        summary = cost_summary.summarize(changelist.queryset, by_model, folded=folded)
        per_group = group_totals.group_spend(changelist.queryset, folded=folded)
        daily = per_group.daily if by_group else summary.daily
        query = changelist.get_query_string()[1:]
        links = _Links(reverse("admin:chatapp_generation_changelist"), changelist)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Cost summary",
            # The app list beside it would leave the tables too little of a 1280 px screen.
            "is_nav_sidebar_enabled": False,
            "cl": changelist,
            "summary": summary,
            "chart": cost_chart.draw(daily, _days(changelist, summary), per_group=by_group),
            "by_model": by_model,
            "by_group": by_group,
            "query": query,
            "sources": [(count, links.source(count.source)) for count in summary.sources],
            "tables": [
                _Table("Per day (UTC)", "day", [(g, links.day(g.key)) for g in summary.days]),
                _Table("Per model", "model", [(g, links.model(g.key)) for g in summary.models]),
                _Table("Per user", "user", [(g, links.user(g.key)) for g in summary.users]),
                _Table(
                    "Per gateway", "gateway", [(g, links.gateway(g.key)) for g in summary.gateways]
                ),
                _Table(
                    "Per user group (a generation counts in each group its user was in when it "
                    "started, so these can add up to more than the total)",
                    "group",
                    [(g, links.to({"group": g.key})) for g in per_group.groups],
                ),
            ],
        }
        return TemplateResponse(request, "admin/chatapp/generation/summary.html", context)

    def export_view(self, request: HttpRequest) -> HttpResponseBase:
        if not self.has_view_permission(request):
            raise PermissionDenied
        try:
            changelist = self._changelist(request, default_range=False)
        except IncorrectLookupParameters:
            return HttpResponse(
                "Those filters are not valid.", status=400, content_type="text/plain"
            )
        stamp = timezone.now().astimezone(datetime.UTC).strftime("%Y%m%d-%H%M%S")
        return csv_file.response(
            changelist.queryset,
            f"generations-{stamp}.csv",
            asynchronous=isinstance(request, ASGIRequest),
            folded=self._folded(request, changelist),
        )


def _without_page(query: QueryDict) -> QueryDict:
    params = query.copy()
    params.pop("p", None)
    return params


def _days(changelist: ChangeList, summary: cost_summary.CostSummary) -> list[datetime.date]:
    """The chart's days: every day from the first with generations to the last, within the
    chosen range (an open range, or one reaching back years, would squeeze the bars to lines)."""
    spec = next(spec for spec in changelist.filter_specs if isinstance(spec, StartedBetween))
    seen = [datetime.date.fromisoformat(group.key) for group in summary.days]
    if not seen:
        return []
    start = max(min(seen), spec.start or min(seen))
    end = min(max(seen), spec.end or max(seen))
    return [start + datetime.timedelta(offset) for offset in range((end - start).days + 1)]


class _Links:
    """The list, filtered as the summary is and then to one group."""

    def __init__(self, url: str, changelist: ChangeList) -> None:
        self.url = url
        self.changelist = changelist

    def to(self, params: dict[str, str], remove: tuple[str, ...] = ()) -> str:
        return self.url + self.changelist.get_query_string(params, remove=list(remove))

    def source(self, source: str) -> str:
        return self.to({"cost_source__exact": source})

    def day(self, key: str) -> str:
        return self.to({"started_from": key, "started_to": key})

    def model(self, key: str) -> str:
        return self.to({"model": key}, remove=("model__isnull",))

    def user(self, key: str) -> str:
        if key.startswith(DELETED_USER):
            name = key.removeprefix(DELETED_USER)
            return self.to({"user_name": name}, remove=("user__id__exact", "user__isnull"))
        return self.to({"user__id__exact": key}, remove=("user_name",))

    def gateway(self, key: str) -> str:
        if not key:  # generations from before gateways were rows
            return self.to({"gateway__isnull": "True"}, remove=("gateway__id__exact",))
        return self.to({"gateway__id__exact": key}, remove=("gateway__isnull",))


@admin.register(LedgerDay)
class LedgerDayAdmin(_LedgerDayAdmin):
    """What retention folded away, read-only like the generations it stands for (their totals
    are in the generation list's and the cost summary's)."""

    list_display = (
        "day",
        "user_label",
        "gateway",
        "model",
        "kind",
        "status",
        "generations",
        "prompt_tokens",
        "completion_tokens",
        "cost_shown",
        "cost_source",
    )
    list_filter = ("gateway", "kind", "status", "cost_source", "cost_unit")
    search_fields = ("user_name", "user__username", "model")
    list_select_related = ("user", "gateway")
    date_hierarchy = "day"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: LedgerDay | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: LedgerDay | None = None) -> bool:
        return False

    @admin.display(description="user", ordering="user_name")
    def user_label(self, obj: LedgerDay) -> str:
        return _user_shown(obj.user, obj.user_name)

    @admin.display(description="cost")
    def cost_shown(self, obj: LedgerDay) -> str:
        if not obj.priced or obj.cost_unit not in CostUnit.values:
            return "-"
        return str(Money(obj.cost, CostUnit(obj.cost_unit)))
