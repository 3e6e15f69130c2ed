"""Spending limits per user and per gateway (issue 20)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("chatapp", "0009_append_only_ledger")]

    operations: list[migrations.operations.base.Operation] = []
