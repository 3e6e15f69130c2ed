"""Groups (issue 39): a policy per auth group (the models and tools its members may use),
group spending limits, and the groups a generation (and a daily total folded from generations)
is recorded as spent by."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("chatapp", "0020_accounts"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="GenerationGroup",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("group_name", models.CharField(max_length=150)),
            ],
        ),
        migrations.CreateModel(
            name="GroupPolicy",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "model_patterns",
                    models.TextField(
                        blank=True,
                        default="*",
                        help_text='One pattern a line, matched against the model\'s ID and against "gateway name:model ID": openai/* (those models on any gateway), Numes:* (all of one gateway), *gpt-4o*. * and ? are wildcards. Empty: no model.',
                        verbose_name="models",
                    ),
                ),
                (
                    "tool_patterns",
                    models.TextField(
                        blank=True,
                        default="*",
                        help_text="One tool name or pattern a line (the names the tool switches list; * for all). Empty: no tool.",
                        verbose_name="tools",
                    ),
                ),
                ("updated_at", models.DateTimeField(auto_now=True)),
            ],
            options={
                "verbose_name": "group policy",
                "verbose_name_plural": "group policies",
                "ordering": ["group__name"],
            },
        ),
        migrations.CreateModel(
            name="LedgerDayGroup",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("group_name", models.CharField(max_length=150)),
            ],
        ),
        migrations.RemoveConstraint(
            model_name="spendinglimit",
            name="spending_limit_one_scope",
        ),
        migrations.AddField(
            model_name="spendinglimit",
            name="group",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="spending_limits",
                to="auth.group",
            ),
        ),
        migrations.AddConstraint(
            model_name="spendinglimit",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("gateway__isnull", True), ("user__isnull", True)),
                    models.Q(("group__isnull", True), ("user__isnull", True)),
                    models.Q(("gateway__isnull", True), ("group__isnull", True)),
                    _connector="OR",
                ),
                name="spending_limit_one_scope",
            ),
        ),
        migrations.AddField(
            model_name="generationgroup",
            name="generation",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="group_links",
                to="chatapp.generation",
            ),
        ),
        migrations.AddField(
            model_name="generationgroup",
            name="group",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="auth.group",
            ),
        ),
        migrations.AddField(
            model_name="grouppolicy",
            name="group",
            field=models.OneToOneField(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="chat_policy",
                to="auth.group",
            ),
        ),
        migrations.AddField(
            model_name="ledgerdaygroup",
            name="group",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="+",
                to="auth.group",
            ),
        ),
        migrations.AddField(
            model_name="ledgerdaygroup",
            name="ledger_day",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="group_links",
                to="chatapp.ledgerday",
            ),
        ),
        migrations.AddIndex(
            model_name="generationgroup",
            index=models.Index(
                fields=["group", "generation"], name="chatapp_gen_group_i_cdd996_idx"
            ),
        ),
        migrations.AddConstraint(
            model_name="generationgroup",
            constraint=models.UniqueConstraint(
                fields=("generation", "group"), name="one_link_per_group"
            ),
        ),
        migrations.AddIndex(
            model_name="ledgerdaygroup",
            index=models.Index(
                fields=["group", "ledger_day"], name="chatapp_led_group_i_2bd646_idx"
            ),
        ),
    ]
