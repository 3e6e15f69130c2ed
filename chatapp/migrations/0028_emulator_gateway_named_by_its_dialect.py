"""The built-in emulator's default gateway is named by its dialect, as its other gateways are:
"Emulator" becomes "Emulator (Numes)" (`configs.emulator_name`), unless an admin made a row of
that name already (then both stay as they are)."""

from typing import Any

from django.db import migrations

OLD, NEW = "Emulator", "Emulator (Numes)"


def rename(apps: Any, schema_editor: Any) -> None:
    gateway = apps.get_model("chatapp", "Gateway")
    if not gateway.objects.filter(name=NEW).exists():
        gateway.objects.filter(name=OLD, emulated=True).update(name=NEW)


def rename_back(apps: Any, schema_editor: Any) -> None:
    gateway = apps.get_model("chatapp", "Gateway")
    if not gateway.objects.filter(name=OLD).exists():
        gateway.objects.filter(name=NEW, emulated=True).update(name=OLD)


class Migration(migrations.Migration):
    dependencies = [("chatapp", "0027_usernames_unique_ignoring_case")]

    operations = [migrations.RunPython(rename, rename_back)]
