"""The final render of an answer, kept so page views never render stored answers (issue 19)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("chatapp", "0007_tools_images_speech")]

    operations: list[migrations.operations.base.Operation] = []
