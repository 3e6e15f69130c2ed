"""Read aloud's names: its audio's model, the relations to it and a help text say read aloud,
not speech or reading. The table is renamed; no data changes (`Generation.kind` keeps its stored
value `speech`)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("chatapp", "0011_image_url_attachments")]

    operations = [
        migrations.RenameModel(old_name="SpeechAudio", new_name="ReadAloudAudio"),
        migrations.AlterField(
            model_name="readaloudaudio",
            name="generation",
            field=models.OneToOneField(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="read_aloud_audio",
                to="chatapp.generation",
            ),
        ),
        migrations.AlterField(
            model_name="generation",
            name="read_aloud",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="read_alouds",
                to="chatapp.message",
            ),
        ),
        migrations.AlterField(
            model_name="spendinglimit",
            name="unknown_price",
            field=models.CharField(
                choices=[("allow", "allow it"), ("refuse", "refuse it")],
                default="allow",
                help_text="What to do with a generation whose worst case cannot be priced in this "
                "unit (no price known for its model, another unit, an image or a read aloud).",
                max_length=8,
                verbose_name="when the price is unknown",
            ),
        ),
    ]
