"""The cost ledger outlives the conversations and users it belongs to (issue 20): a generation
keeps its user (and the user's name) on its own row, its conversation and messages are SET_NULL
instead of CASCADE, and `LedgerDay` holds what `manage.py fold_ledger` folds away."""

from typing import Any

import django.db.models.deletion
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import migrations, models

_CHOICES_KIND = [("chat", "chat answer"), ("image", "image generation"), ("speech", "read aloud")]
_CHOICES_STATUS = [
    ("streaming", "Streaming"),
    ("completed", "Completed"),
    ("cancelled", "Cancelled"),
    ("failed", "Failed"),
    ("incomplete", "Incomplete"),
    ("interrupted", "Interrupted"),
]
_CHOICES_UNIT = [
    ("usd", "US dollars"),
    ("micro_usd", "micro-USD"),
    ("sat", "satoshis"),
    ("pnp", "PnP"),
    ("credits", "credits"),
]
_CHOICES_SOURCE = [
    ("stream", "usage chunk"),
    ("record", "generation record"),
    ("estimate", "estimate"),
    ("pending", "pending"),
    ("unavailable", "unavailable"),
    ("not_billed", "not billed"),
]


def owners_onto_rows(apps: Any, schema_editor: Any) -> None:
    """Every existing generation's user and user name, from its conversation: one UPDATE per
    user, so a large ledger is not loaded row by row."""
    Conversation = apps.get_model("chatapp", "Conversation")
    Generation = apps.get_model("chatapp", "Generation")
    User = apps.get_model(settings.AUTH_USER_MODEL)
    username = get_user_model().USERNAME_FIELD  # historical models do not carry it
    names = dict(User.objects.values_list("pk", username))
    owners = Conversation.objects.values_list("user_id", flat=True).distinct()
    for user_id in owners:
        Generation.objects.filter(conversation__user_id=user_id).update(
            user_id=user_id, user_name=str(names.get(user_id, ""))[:150]
        )


class Migration(migrations.Migration):
    dependencies = [
        ("chatapp", "0008_rendered_answers"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="generation",
            name="user",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="generations",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="generation",
            name="user_name",
            field=models.CharField(blank=True, max_length=150),
        ),
        migrations.AlterField(
            model_name="generation",
            name="conversation",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="generations",
                to="chatapp.conversation",
            ),
        ),
        migrations.AlterField(
            model_name="generation",
            name="message",
            field=models.OneToOneField(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="generation",
                to="chatapp.message",
            ),
        ),
        migrations.AlterField(
            model_name="generation",
            name="read_aloud",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="readings",
                to="chatapp.message",
            ),
        ),
        migrations.AddIndex(
            model_name="generation",
            index=models.Index(
                fields=["user", "started_at"], name="chatapp_gen_user_id_f6e251_idx"
            ),
        ),
        migrations.RunPython(owners_onto_rows, migrations.RunPython.noop, elidable=True),
        migrations.CreateModel(
            name="LedgerDay",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("day", models.DateField()),
                ("user_name", models.CharField(blank=True, max_length=150)),
                ("model", models.CharField(max_length=200)),
                ("kind", models.CharField(choices=_CHOICES_KIND, max_length=16)),
                ("status", models.CharField(choices=_CHOICES_STATUS, max_length=16)),
                ("cost_unit", models.CharField(blank=True, choices=_CHOICES_UNIT, max_length=16)),
                ("cost_source", models.CharField(choices=_CHOICES_SOURCE, max_length=16)),
                ("generations", models.PositiveIntegerField()),
                ("priced", models.PositiveIntegerField(help_text="Generations with an amount.")),
                ("prompt_tokens", models.BigIntegerField(default=0)),
                ("completion_tokens", models.BigIntegerField(default=0)),
                ("reasoning_tokens", models.BigIntegerField(default=0)),
                ("cached_tokens", models.BigIntegerField(default=0)),
                ("cost_whole", models.BigIntegerField(default=0)),
                ("cost_high", models.BigIntegerField(default=0)),
                ("cost_low", models.BigIntegerField(default=0)),
                ("folded_at", models.DateTimeField(auto_now_add=True)),
                (
                    "gateway",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="ledger_days",
                        to="chatapp.gateway",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["-day", "-id"],
                "indexes": [
                    models.Index(fields=["day", "cost_unit"], name="chatapp_led_day_08c4e8_idx"),
                    models.Index(fields=["user", "day"], name="chatapp_led_user_id_9379bd_idx"),
                ],
            },
        ),
    ]
