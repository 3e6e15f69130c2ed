"""The cost ledger outlives the conversations and users it belongs to (issue 20)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("chatapp", "0008_rendered_answers")]

    operations: list[migrations.operations.base.Operation] = []
