"""Usernames unique whatever their case (chatapp/identity/usernames.py): a unique index on
`UPPER(username)` of Django's user table, which SQLite and PostgreSQL both take. Names that
already differ only by case stop the migration, naming them: which of two accounts keeps its
name is a person's choice, not a migration's."""

from typing import Any

from django.db import migrations
from django.db.models import Count
from django.db.models.functions import Upper

INDEX = "chatapp_username_unique_ignoring_case"


def refuse_duplicates(apps: Any, schema_editor: Any) -> None:
    users = apps.get_model("auth", "User")
    clashes = (
        users.objects.annotate(folded=Upper("username"))
        .values("folded")
        .annotate(accounts=Count("id"))
        .filter(accounts__gt=1)
    )
    names = [
        ", ".join(
            users.objects.filter(username__iexact=row["folded"]).values_list("username", flat=True)
        )
        for row in clashes
    ]
    if names:
        raise RuntimeError(
            "These usernames differ only by case: "
            + "; ".join(names)
            + ". Rename all but one of each (Admin → Users, or manage.py shell), then migrate again."
        )


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("chatapp", "0026_self_sign_ups"),
    ]

    operations = [
        migrations.RunPython(refuse_duplicates, migrations.RunPython.noop),
        migrations.RunSQL(
            f"CREATE UNIQUE INDEX {INDEX} ON auth_user (UPPER(username))",
            f"DROP INDEX {INDEX}",
        ),
    ]
