"""Spending limits per user and per gateway (issue 20)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chatapp", "0009_append_only_ledger"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="generation",
            name="spend_ceiling",
            field=models.DecimalField(blank=True, decimal_places=15, max_digits=30, null=True),
        ),
        migrations.CreateModel(
            name="SpendingLimit",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "unit",
                    models.CharField(
                        choices=[
                            ("usd", "US dollars"),
                            ("micro_usd", "micro-USD"),
                            ("sat", "satoshis"),
                            ("pnp", "PnP"),
                            ("credits", "credits"),
                        ],
                        max_length=16,
                    ),
                ),
                (
                    "period",
                    models.CharField(
                        choices=[("day", "a day"), ("month", "a month")],
                        default="month",
                        max_length=8,
                    ),
                ),
                ("amount", models.DecimalField(decimal_places=15, max_digits=30)),
                (
                    "unknown_price",
                    models.CharField(
                        choices=[("allow", "allow it"), ("refuse", "refuse it")],
                        default="allow",
                        help_text="What to do with a generation whose worst case cannot be "
                        "priced in this unit (no price known for its model, another unit, an "
                        "image or a reading).",
                        max_length=8,
                        verbose_name="when the price is unknown",
                    ),
                ),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "gateway",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="spending_limits",
                        to="chatapp.gateway",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="spending_limits",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["gateway", "user", "unit", "period"],
                "constraints": [
                    models.CheckConstraint(
                        condition=models.Q(
                            ("user__isnull", True), ("gateway__isnull", True), _connector="OR"
                        ),
                        name="spending_limit_one_scope",
                    ),
                    models.CheckConstraint(
                        condition=models.Q(("amount__gte", 0)), name="spending_limit_not_negative"
                    ),
                ],
            },
        ),
    ]
