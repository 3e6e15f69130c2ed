"""The cost admin: read-only generations with totals, the summary, CSV, gateways' keys, prices."""

from __future__ import annotations

import csv
import datetime
import io
import random
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, localcontext
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission
from django.db import connection, connections
from django.db.models import Sum
from django.test import AsyncClient, Client
from django.urls import reverse

from chatapp.conversations.models import Conversation, Message
from chatapp.costs import chart as cost_chart
from chatapp.costs import csv_file
from chatapp.costs import summary as cost_summary
from chatapp.costs.models import Generation, SpendingLimit
from chatapp.gateways import key_vault
from chatapp.gateways.models import Gateway, ModelPrice
from chatapp.gateways.units import CostUnit, Money

SUMMARY = "admin:chatapp_generation_summary"
EXPORT = "admin:chatapp_generation_export"
CHANGELIST = "admin:chatapp_generation_changelist"
NOW = datetime.datetime.now(datetime.UTC).replace(microsecond=0)


def record(
    user: Any,
    gateway: Gateway | None,
    *,
    model: str = "numes/a",
    cost: str | None = "0.5",
    unit: str = "usd",
    source: str = "stream",
    status: str = "completed",
    started: datetime.datetime | None = None,
    upstream_id: str = "",
    conversation: Conversation | None = None,
) -> Generation:
    conversation = conversation or Conversation.objects.create(user=user, gateway=gateway)
    message = Message.objects.create(conversation=conversation, role="assistant", content="ok")
    generation = Generation.objects.create(
        message=message,
        conversation=conversation,
        gateway=gateway,
        model=model,
        status=status,
        upstream_id=upstream_id,
        request_id=f"req-{message.pk}",
        prompt_tokens=10,
        completion_tokens=5,
        cost=None if cost is None else Decimal(cost),
        cost_unit="" if cost is None else unit,
        cost_source=source,
        ttft_ms=300,
    )
    started = started or NOW - datetime.timedelta(days=1)
    # started_at is auto_now_add: set the time afterwards.
    Generation.objects.filter(pk=generation.pk).update(
        started_at=started, finished_at=started + datetime.timedelta(seconds=4)
    )
    generation.refresh_from_db()
    return generation


def amounts(totals: cost_summary.GroupTotals) -> dict[str, Decimal]:
    return {total.unit.value: total.amount for total in totals.totals}


@pytest.fixture
def numes(db: None) -> Gateway:
    return Gateway.objects.create(
        name="Numes", base_url="https://numes.example/api/v1", dialect="numes", cost_unit="usd"
    )


@pytest.fixture
def nodul(db: None) -> Gateway:
    return Gateway.objects.create(
        name="Nodul", base_url="https://nodul.example/v1", dialect="nodul", cost_unit="pnp"
    )


@pytest.fixture
def admin(admin_user: Any) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


# --- Access -----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_summary_renders_for_a_superuser(admin: Client, alice: Any, numes: Gateway) -> None:
    record(alice, numes, cost="0.5")

    response = admin.get(reverse(SUMMARY))

    assert response.status_code == 200
    html = response.content.decode()
    assert "<h1>Cost summary</h1>" in html
    assert "<strong>$0.50</strong>" in html
    assert '<svg xmlns="http://www.w3.org/2000/svg"' in html


@pytest.mark.django_db
def test_the_admin_index_and_the_list_link_to_the_summary(admin: Client) -> None:
    summary = reverse(SUMMARY)

    assert f'href="{summary}"' in admin.get(reverse("admin:index")).content.decode()
    assert f'href="{summary}"' in admin.get(reverse(CHANGELIST)).content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("name", [SUMMARY, EXPORT])
def test_a_user_who_is_not_staff_is_sent_to_the_login(
    client: Client, alice: Any, name: str
) -> None:
    client.force_login(alice)

    response = client.get(reverse(name))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))


@pytest.mark.django_db
@pytest.mark.parametrize("name", [SUMMARY, EXPORT])
def test_staff_without_the_view_permission_are_refused(
    client: Client, alice: Any, name: str
) -> None:
    alice.is_staff = True
    alice.save()
    client.force_login(alice)

    assert client.get(reverse(name)).status_code == 403


@pytest.mark.django_db
def test_staff_with_the_view_permission_see_the_summary(client: Client, alice: Any) -> None:
    alice.is_staff = True
    alice.save()
    alice.user_permissions.add(Permission.objects.get(codename="view_generation"))
    client.force_login(alice)

    assert client.get(reverse(SUMMARY)).status_code == 200


# --- Generations are read-only ----------------------------------------------------------------


@pytest.mark.django_db
def test_generations_cannot_be_added_or_changed(admin: Client, alice: Any, numes: Gateway) -> None:
    generation = record(alice, numes, cost="0.5", upstream_id="gen-1")
    change = reverse("admin:chatapp_generation_change", args=[generation.pk])

    assert admin.get(reverse("admin:chatapp_generation_add")).status_code == 403
    page = admin.get(change).content.decode()
    assert 'name="_save"' not in page
    assert 'name="cost"' not in page  # shown, not an input
    response = admin.post(change, {"cost": "9", "upstream_id": "forged", "prompt_tokens": "1"})
    assert response.status_code == 403
    generation.refresh_from_db()
    assert (generation.cost, generation.upstream_id) == (Decimal("0.5"), "gen-1")
    assert (
        reverse("admin:chatapp_generation_add")
        not in admin.get(reverse(CHANGELIST)).content.decode()
    )


@pytest.mark.django_db
def test_the_admins_amounts_are_exact_without_trailing_zeros(
    admin: Client, alice: Any, numes: Gateway
) -> None:
    """#45: "0.000400000000000" in the admin: every figure exact, its trailing zeros dropped."""
    generation = record(alice, numes, cost="0.0004")
    Generation.objects.filter(pk=generation.pk).update(spend_ceiling=Decimal("0.0123"))
    page = admin.get(reverse("admin:chatapp_generation_change", args=[generation.pk]))
    html = page.content.decode()
    assert "0.000400000000000" not in html
    assert '<div class="readonly">0.0004</div>' in html  # the stored decimal
    assert '<div class="readonly">$0.0004</div>' in html  # the amount
    assert '<div class="readonly">0.0123</div>' in html  # the spend ceiling
    price = ModelPrice.objects.create(
        gateway=numes, model="numes/a", prompt=Decimal("0.0004"), completion=Decimal(2)
    )
    form = admin.get(reverse("admin:chatapp_modelprice_change", args=[price.pk])).content.decode()
    assert 'value="0.0004"' in form
    assert 'value="2"' in form
    limit = SpendingLimit.objects.create(user=alice, unit="usd", amount=Decimal("12.5"))
    form = admin.get(reverse("admin:chatapp_spendinglimit_change", args=[limit.pk])).content
    assert 'value="12.5"' in form.decode()
    assert "12.500000000000000" not in form.decode()


@pytest.mark.django_db
def test_not_even_a_superuser_may_delete_a_generation(
    admin: Client, alice: Any, numes: Gateway
) -> None:
    generation = record(alice, numes)
    delete = reverse("admin:chatapp_generation_delete", args=[generation.pk])

    assert admin.get(delete).status_code == 403
    assert admin.post(delete, {"post": "yes"}).status_code == 403
    listed = admin.post(
        reverse(CHANGELIST),
        {"action": "delete_selected", "_selected_action": [generation.pk], "post": "yes"},
    )

    assert listed.status_code in (200, 302)
    assert Generation.objects.filter(pk=generation.pk).exists()
    page = admin.get(reverse(CHANGELIST)).content.decode()
    assert "delete_selected" not in page


@pytest.mark.django_db
def test_the_list_shows_what_an_operator_scans(admin: Client, alice: Any, numes: Gateway) -> None:
    generation = record(alice, numes, cost="130", unit="micro_usd", upstream_id="gen-xyz")

    html = admin.get(reverse(CHANGELIST)).content.decode()

    for text in ("alice", "Numes", "numes/a", "completed", "$0.000130", "usage chunk", "4.0 s"):
        assert text in html
    conversation = reverse("admin:chatapp_conversation_change", args=[generation.conversation_id])
    assert f'href="{conversation}"' in html


# --- Totals -----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_totals_are_per_unit_and_never_mixed(
    admin: Client, alice: Any, numes: Gateway, nodul: Gateway
) -> None:
    record(alice, numes, cost="0.5", unit="usd")
    record(alice, numes, cost="0.25", unit="usd", source="estimate")
    record(alice, numes, cost="120", unit="sat")
    record(alice, nodul, cost="0.0000081", unit="pnp", model="nodul/x")
    record(alice, numes, cost=None, source="pending", status="streaming")

    response = admin.get(reverse(SUMMARY))
    overall = response.context["summary"].overall

    assert amounts(overall) == {
        "usd": Decimal("0.75"),
        "sat": Decimal("120"),
        "pnp": Decimal("0.0000081"),
    }
    usd = overall.totals[0]
    assert (usd.unit, usd.estimated, usd.priced) == (CostUnit.USD, Decimal("0.25"), 2)
    assert (overall.generations, overall.unpriced) == (5, 1)
    html = response.content.decode()
    assert "<strong>$0.75</strong>" in html
    assert "(of which $0.25 estimated)" in html
    assert "<strong>120 sat</strong>" in html
    assert "<strong>0.0000081 PnP</strong>" in html
    list_totals = admin.get(reverse(CHANGELIST)).context["cost_totals"]
    assert amounts(list_totals) == amounts(overall)


@pytest.mark.django_db
def test_converted_totals_are_marked(
    admin: Client, alice: Any, numes: Gateway, settings: Any
) -> None:
    settings.CHAT_COST_RATES = "sat=0.001"
    record(alice, numes, cost="120", unit="sat")

    html = admin.get(reverse(SUMMARY)).content.decode()

    assert "&asymp; $0.12 converted" in html


@pytest.mark.django_db
def test_pending_and_other_sources_are_counted_with_links(
    admin: Client, alice: Any, numes: Gateway
) -> None:
    record(alice, numes, cost=None, source="pending", status="streaming")
    record(alice, numes, cost=None, source="pending", status="streaming")
    record(alice, numes, cost=None, source="unavailable")
    record(alice, numes, cost="0.1")

    response = admin.get(reverse(SUMMARY))

    counts = {
        count.source.value: count.generations for count in response.context["summary"].sources
    }
    assert counts == {
        "stream": 1,
        "record": 0,
        "estimate": 0,
        "pending": 2,
        "unavailable": 1,
        "not_billed": 0,
    }
    html = response.content.decode()
    assert re.search(r'href="[^"]*cost_source__exact=pending[^"]*">2</a>', html)
    pending = admin.get(reverse(CHANGELIST), {"cost_source__exact": "pending"})
    assert pending.context["cl"].result_count == 2


@dataclass(frozen=True)
class Row:
    user: str
    gateway: str
    model: str
    cost: str | None
    unit: str
    source: str
    status: str
    days_ago: int
    upstream_id: str


ROWS = [
    Row("alice", "numes", "numes/a", "0.5", "usd", "stream", "completed", 1, "gen-a1"),
    Row("alice", "numes", "numes/b", "0.25", "usd", "estimate", "completed", 2, "gen-a2"),
    Row("bob", "nodul", "nodul/x", "0.0000081", "pnp", "stream", "completed", 3, "gen-b1"),
    Row("bob", "numes", "numes/a", None, "", "pending", "streaming", 1, "gen-b2"),
    Row("bob", "numes", "numes/a", "0.1", "usd", "stream", "failed", 10, "gen-b3"),
    Row("alice", "numes", "numes/a", "7", "usd", "record", "completed", 40, "gen-a3"),
]
FILTERS: list[tuple[str, Callable[[dict[str, Any]], dict[str, str]], Callable[[Row], bool]]] = [
    ("gateway", lambda ids: {"gateway__id__exact": ids["nodul"]}, lambda r: r.gateway == "nodul"),
    ("user", lambda ids: {"user__id__exact": ids["bob"]}, lambda r: r.user == "bob"),
    ("model", lambda ids: {"model": "numes/b"}, lambda r: r.model == "numes/b"),
    ("status", lambda ids: {"status__exact": "failed"}, lambda r: r.status == "failed"),
    ("source", lambda ids: {"cost_source__exact": "estimate"}, lambda r: r.source == "estimate"),
    ("search", lambda ids: {"q": "gen-b"}, lambda r: r.upstream_id.startswith("gen-b")),
    (
        "range",
        lambda ids: {"started_from": ids["5 days ago"], "started_to": ids["today"]},
        lambda r: r.days_ago <= 5,
    ),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("name", "params", "keep"), FILTERS, ids=[name for name, *_ in FILTERS])
def test_filters_narrow_the_totals(
    admin: Client,
    alice: Any,
    bob: Any,
    numes: Gateway,
    nodul: Gateway,
    name: str,
    params: Callable[[dict[str, Any]], dict[str, str]],
    keep: Callable[[Row], bool],
) -> None:
    users, gateways = {"alice": alice, "bob": bob}, {"numes": numes, "nodul": nodul}
    for row in ROWS:
        record(
            users[row.user], gateways[row.gateway], model=row.model, cost=row.cost,
            unit=row.unit, source=row.source, status=row.status, upstream_id=row.upstream_id,
            started=NOW - datetime.timedelta(days=row.days_ago),
        )  # fmt: skip
    expected: dict[str, Decimal] = defaultdict(Decimal)
    for row in filter(keep, ROWS):
        if row.cost is not None:
            expected[row.unit] += Decimal(row.cost)
    ids = {"nodul": str(nodul.pk), "bob": str(bob.pk), "today": NOW.date().isoformat()}
    ids["5 days ago"] = (NOW - datetime.timedelta(days=5)).date().isoformat()
    # The summary's own default is the last 30 days: give it the whole history.
    everything = {"started_from": "2000-01-01", **params(ids)}

    listed = admin.get(reverse(CHANGELIST), params(ids))
    summary = admin.get(reverse(SUMMARY), everything)

    assert amounts(listed.context["cost_totals"]) == expected
    assert listed.context["cl"].result_count == len(list(filter(keep, ROWS)))
    assert amounts(summary.context["summary"].overall) == expected


@pytest.mark.django_db
def test_the_summary_tables_group_by_day_model_user_and_gateway(
    admin: Client, alice: Any, bob: Any, numes: Gateway, nodul: Gateway
) -> None:
    day = NOW - datetime.timedelta(days=2)
    record(alice, numes, model="numes/a", cost="0.5", started=day)
    record(alice, numes, model="numes/b", cost="0.25", started=day)
    record(bob, nodul, model="nodul/x", cost="3", unit="pnp", started=day)
    record(bob, None, model="old", cost="1", started=NOW - datetime.timedelta(days=1))

    summary = admin.get(reverse(SUMMARY)).context["summary"]

    assert {g.label: amounts(g) for g in summary.models} == {
        "numes/a": {"usd": Decimal("0.5")},
        "numes/b": {"usd": Decimal("0.25")},
        "nodul/x": {"pnp": Decimal("3")},
        "old": {"usd": Decimal("1")},
    }
    assert {g.label: amounts(g) for g in summary.users} == {
        "alice": {"usd": Decimal("0.75")},
        "bob": {"usd": Decimal("1"), "pnp": Decimal("3")},
    }
    assert {g.label: amounts(g) for g in summary.gateways} == {
        "Numes": {"usd": Decimal("0.75")},
        "Nodul": {"pnp": Decimal("3")},
        "(no gateway)": {"usd": Decimal("1")},
    }
    assert [(g.key, amounts(g)) for g in summary.days] == [
        (day.date().isoformat(), {"usd": Decimal("0.75"), "pnp": Decimal("3")}),
        ((NOW - datetime.timedelta(days=1)).date().isoformat(), {"usd": Decimal("1")}),
    ]


# --- Exact sums -------------------------------------------------------------------------------


def _bulk_generations(gateway: Gateway, user: Any, count: int, cost: Decimal, unit: str) -> None:
    conversation = Conversation.objects.create(user=user, gateway=gateway)
    messages = Message.objects.bulk_create(
        Message(conversation=conversation, role="assistant") for _ in range(count)
    )
    Generation.objects.bulk_create(
        Generation(
            message=message,
            conversation=conversation,
            user=user,
            user_name=user.username,
            gateway=gateway,
            model="nodul/x",
            status="completed",
            cost=cost,
            cost_unit=unit,
            cost_source="stream",
        )
        for message in messages
    )


def _copies(template: Generation, count: int) -> None:
    """`count` more generations like `template`, each with a message of its own, copied by the
    database itself (bulk_create takes half a minute for 100,000)."""
    columns = {
        model: [field.column for field in model._meta.concrete_fields if not field.primary_key]
        for model in (Message, Generation)
    }
    message_columns = ", ".join(columns[Message])
    generation_columns = ", ".join(columns[Generation])
    picked = ", ".join("m.id" if c == "message_id" else f"g.{c}" for c in columns[Generation])
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %s) "
            f"INSERT INTO {Message._meta.db_table} ({message_columns}) "
            f"SELECT {message_columns} FROM {Message._meta.db_table}, n WHERE id = %s",
            [count, template.message_id],
        )
        cursor.execute(
            f"INSERT INTO {Generation._meta.db_table} ({generation_columns}) "
            f"SELECT {picked} FROM {Generation._meta.db_table} g, {Message._meta.db_table} m "
            f"WHERE g.id = %s AND m.id > %s",
            [template.pk, template.message_id],
        )


@pytest.mark.django_db
def test_a_hundred_thousand_tiny_amounts_add_up_exactly(
    admin: Client, alice: Any, nodul: Gateway
) -> None:
    template = record(alice, nodul, model="nodul/x", cost="0.0000081", unit="pnp")
    _copies(template, 99_999)
    assert Generation.objects.filter(cost_unit="pnp").count() == 100_000

    html = admin.get(reverse(SUMMARY)).content.decode()
    listed = admin.get(reverse(CHANGELIST)).content.decode()

    assert "<strong>0.81 PnP</strong>" in html
    assert "<strong>0.81 PnP</strong>" in listed
    assert amounts(cost_summary.totals(Generation.objects.all())) == {"pnp": Decimal("0.81")}
    # What the database's own SUM would have shown: SQLite before 3.43 summed doubles naively
    # (the standard module's 3.40); later ones, sqlean's among them, compensate the rounding.
    if connection.vendor == "sqlite" and connection.Database.sqlite_version_info < (3, 43):
        assert Generation.objects.aggregate(total=Sum("cost"))["total"] != Decimal("0.81")


@pytest.mark.django_db
def test_sums_are_exact_for_amounts_of_every_magnitude(alice: Any, nodul: Gateway) -> None:
    rng = random.Random(9)
    values = [
        Decimal(rng.randint(1, 10**digits - 1)).scaleb(-places)
        for _ in range(3)
        for digits in range(1, 16)
        for places in range(0, 16)
        if digits - places <= 13
    ]
    values += [Decimal("0.000000000000001"), Decimal("9999999999.99999"), Decimal("1"), Decimal(0)]
    conversation = Conversation.objects.create(user=alice)
    messages = Message.objects.bulk_create(
        Message(conversation=conversation, role="assistant") for _ in values
    )
    Generation.objects.bulk_create(
        Generation(message=m, conversation=conversation, model="x", cost=v, cost_unit="sat")
        for m, v in zip(messages, values, strict=True)
    )  # fmt: skip
    stored = list(Generation.objects.values_list("cost", flat=True))

    total = amounts(cost_summary.totals(Generation.objects.all()))["sat"]

    # Exactly the sum of the amounts as Django reads each back (which on SQLite is to its 15
    # significant digits, as the column keeps them), where the database's own SUM drifts.
    with localcontext(prec=60):
        assert total == sum(stored, Decimal(0)) == sum(values, Decimal(0))


# --- CSV --------------------------------------------------------------------------------------


def _csv(response: Any) -> tuple[bytes, list[dict[str, str]]]:
    body = b"".join(response.streaming_content)
    return body, list(csv.DictReader(io.StringIO(body.decode("utf-8-sig"))))


@pytest.mark.django_db
def test_the_csv_adds_up_to_the_page_and_opens_in_a_spreadsheet(
    admin: Client, alice: Any, bob: Any, numes: Gateway, nodul: Gateway
) -> None:
    record(alice, numes, cost="0.000130", unit="usd", upstream_id="gen-1")
    record(alice, numes, cost="0.25", unit="usd", source="estimate")
    record(bob, nodul, model='=HYPERLINK("x")', cost="0.0000081", unit="pnp")
    record(bob, nodul, model="nodul/é", cost="120.5", unit="sat")
    record(bob, numes, cost=None, source="pending", status="streaming")

    page = admin.get(reverse(SUMMARY))
    response = admin.get(reverse(EXPORT) + "?" + page.context["query"])
    body, rows = _csv(response)

    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"].startswith('attachment; filename="generations-')
    assert body.startswith(b"\xef\xbb\xbf")  # UTF-8 byte-order mark
    assert b"\r\n" in body
    assert list(rows[0]) == list(csv_file.COLUMNS)
    assert len(rows) == 5
    sums: dict[str, Decimal] = defaultdict(Decimal)
    for row in rows:
        if row["cost"]:
            sums[row["cost_unit"]] += Decimal(row["cost"])
    page_totals = {t.unit.value: str(t.money) for t in page.context["summary"].overall.totals}
    assert {
        unit: str(Money(amount, CostUnit(unit))) for unit, amount in sums.items()
    } == page_totals
    assert {row["cost"] for row in rows} == {"0.00013", "0.25", "0.0000081", "120.5", ""}
    iso = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
    assert all(iso.match(row["started_at"]) and iso.match(row["finished_at"]) for row in rows)
    assert {row["duration_ms"] for row in rows} == {"4000"}
    models = {row["model"] for row in rows}
    assert '\'=HYPERLINK("x")' in models  # defused: a spreadsheet shows it as text
    assert "nodul/é" in models


@pytest.mark.django_db
def test_the_csv_takes_the_lists_filters(
    admin: Client, alice: Any, bob: Any, numes: Gateway
) -> None:
    record(alice, numes, upstream_id="gen-alice")
    record(bob, numes, upstream_id="gen-bob")

    _, rows = _csv(admin.get(reverse(EXPORT), {"user__id__exact": bob.pk}))

    assert [row["generation_id"] for row in rows] == ["gen-bob"]


@pytest.mark.django_db(transaction=True)
async def test_the_csv_streams_under_asgi(admin_user: Any, alice: Any, numes: Gateway) -> None:
    count = csv_file.CHUNK_ROWS + 5  # more than one chunk
    await sync_to_async(_bulk_generations)(numes, alice, count, Decimal("0.001"), "usd")
    client = AsyncClient()
    await client.aforce_login(admin_user)

    try:
        response = await client.get(reverse(EXPORT))
        body = b"".join([piece async for piece in response.streaming_content])
    finally:
        # The view's thread keeps its connection (CONN_MAX_AGE): let the test database go.
        await sync_to_async(connections.close_all)()

    rows = list(csv.DictReader(io.StringIO(body.decode("utf-8-sig"))))
    assert len(rows) == count
    assert sum(Decimal(row["cost"]) for row in rows) == Decimal("0.001") * count


def test_formula_cells_are_defused_and_amounts_are_plain() -> None:
    assert [csv_file._text(text) for text in ("=1+1", "+1", "-1", "@x", "\tx", "ok")] == [
        "'=1+1",
        "'+1",
        "'-1",
        "'@x",
        "'\tx",
        "ok",
    ]
    assert csv_file.plain(Decimal("0.000008100000000")) == "0.0000081"
    assert csv_file.plain(Decimal("130.000000000000000")) == "130"
    assert csv_file.plain(Decimal("1E+3")) == "1000"


# --- The chart --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_chart_is_inline_svg_and_escapes_model_names(
    admin: Client, alice: Any, numes: Gateway
) -> None:
    record(alice, numes, model="<script>alert(1)</script>", cost="0.5")

    response = admin.get(reverse(SUMMARY), {"series": "model"})

    html = response.content.decode()
    start = html.index('<svg xmlns="http://www.w3.org/2000/svg" class="cost-chart"')
    svg = html[start : html.index("</svg>", start)]
    assert "<rect" in svg
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in svg
    assert "<script>alert(1)" not in html
    assert " style=" not in svg  # the CSP forbids inline styles
    csp = response["Content-Security-Policy"]
    assert "style-src 'self'" in csp
    assert "'unsafe-inline'" not in csp


def test_the_chart_has_a_panel_per_unit_and_folds_small_series() -> None:
    day = datetime.date(2026, 12, 1)
    points = [
        cost_summary.DailyAmount(day, CostUnit.USD, f"m{index}", Decimal(index + 1))
        for index in range(cost_chart.MAX_SERIES + 3)
    ]
    points.append(cost_summary.DailyAmount(day, CostUnit.SAT, "sat", Decimal(5)))

    svg = str(cost_chart.draw(points, [day - datetime.timedelta(1), day]))

    assert "US dollars: $45.00 in the range" in svg
    assert "satoshis: 5 sat in the range" in svg
    assert cost_chart.OTHER_NAME in svg
    assert cost_chart.draw([], [day]) == ""


# --- Gateways and prices ----------------------------------------------------------------------


GATEWAY_FORM = {
    "name": "Numes",
    "base_url": "https://numes.example/api/v1",
    "dialect": "numes",
    "cost_unit": "usd",
    "enabled": "on",
    "api_key_env": "",
}


@pytest.mark.django_db
def test_the_api_key_is_write_only(admin: Client) -> None:
    secret = "sk-live-0123456789abcdef"

    added = admin.post(reverse("admin:chatapp_gateway_add"), {**GATEWAY_FORM, "api_key": secret})

    assert added.status_code == 302
    gateway = Gateway.objects.get()
    assert key_vault.decrypt(gateway.api_key_encrypted) == secret
    change = reverse("admin:chatapp_gateway_change", args=[gateway.pk])
    for url in (change, reverse("admin:chatapp_gateway_changelist"), reverse("admin:index")):
        html = admin.get(url).content.decode()
        assert secret not in html
        assert gateway.api_key_encrypted not in html
    change_page = admin.get(change).content.decode()
    assert "stored (encrypted)" in change_page
    assert re.search(r'<input type="password" name="api_key"[^>]*>', change_page)
    assert 'name="api_key" value' not in change_page

    admin.post(change, {**GATEWAY_FORM, "api_key": ""})  # blank: keep it
    gateway.refresh_from_db()
    assert key_vault.decrypt(gateway.api_key_encrypted) == secret

    admin.post(change, {**GATEWAY_FORM, "api_key": "", "clear_api_key": "on"})
    gateway.refresh_from_db()
    assert gateway.api_key_encrypted == ""


@pytest.mark.django_db
def test_a_new_key_and_clearing_it_at_once_is_refused(admin: Client, numes: Gateway) -> None:
    change = reverse("admin:chatapp_gateway_change", args=[numes.pk])

    response = admin.post(change, {**GATEWAY_FORM, "api_key": "sk-new", "clear_api_key": "on"})

    assert response.status_code == 200
    assert "Enter a new key or clear the stored one, not both." in response.content.decode()
    assert "sk-new" not in response.content.decode()


@pytest.mark.django_db
def test_the_gateway_list_shows_its_columns(admin: Client, numes: Gateway) -> None:
    html = admin.get(reverse("admin:chatapp_gateway_changelist")).content.decode()

    for text in ("Numes", "https://numes.example/api/v1", "US dollars", "none"):
        assert text in html


@pytest.mark.django_db
def test_a_gateway_with_generations_is_not_deleted(
    admin: Client, alice: Any, numes: Gateway
) -> None:
    record(alice, numes)
    delete = reverse("admin:chatapp_gateway_delete", args=[numes.pk])

    page = admin.get(delete).content.decode()
    admin.post(delete, {"post": "yes"})

    assert "1 generation(s) and 1 conversation(s)" in page
    assert "disable the gateway instead" in page
    assert Gateway.objects.filter(pk=numes.pk).exists()


@pytest.mark.django_db
def test_a_gateway_without_history_can_be_deleted(admin: Client, numes: Gateway) -> None:
    admin.post(reverse("admin:chatapp_gateway_delete", args=[numes.pk]), {"post": "yes"})

    assert not Gateway.objects.exists()


@pytest.mark.django_db
def test_a_price_saved_by_an_admin_is_the_admins(admin: Client, numes: Gateway) -> None:
    price = ModelPrice.objects.create(
        gateway=numes, model="numes/a", prompt=Decimal(1), completion=Decimal(2), source="gateway"
    )
    change = reverse("admin:chatapp_modelprice_change", args=[price.pk])
    form = {"gateway": numes.pk, "model": "numes/a", "prompt": "0.000001", "completion": "0.000002"}

    admin.post(change, form)

    price.refresh_from_db()
    assert (price.prompt, price.source) == (Decimal("0.000001"), ModelPrice.Source.ADMIN)
    listed = admin.get(reverse("admin:chatapp_modelprice_changelist")).content.decode()
    assert "numes/a" in listed
    assert "set by an admin" in listed
