"""The final render of an answer, kept so page views never render stored answers (issue 19)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("chatapp", "0007_tools_images_speech")]

    operations = [
        migrations.AddField(
            model_name="message",
            name="html",
            field=models.TextField(blank=True),
        ),
        migrations.AddField(
            model_name="message",
            name="html_key",
            field=models.CharField(blank=True, max_length=64),
        ),
    ]
