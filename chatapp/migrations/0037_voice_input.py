"""Voice input: a gateway's transcription model, and the transcription kind of generation. The
emulator's gateways transcribe (every dialect of it serves POST /audio/transcriptions), so voice
input works offline."""

from typing import Any

from django.db import migrations, models

EMULATOR_TRANSCRIPTION_MODEL = "emulator/audio"


def emulator_transcribes(apps: Any, schema_editor: Any) -> None:
    Gateway = apps.get_model("chatapp", "Gateway")
    Gateway.objects.filter(emulated=True, transcription_model="").update(
        transcription_model=EMULATOR_TRANSCRIPTION_MODEL
    )


class Migration(migrations.Migration):
    dependencies = [
        ("chatapp", "0036_assistant_collections"),
    ]

    operations = [
        migrations.AddField(
            model_name="gateway",
            name="transcription_model",
            field=models.CharField(
                blank=True,
                help_text="The model voice input asks for (POST /audio/transcriptions, OpenAI's speech-to-text); empty: this gateway does not transcribe.",
                max_length=200,
            ),
        ),
        migrations.AlterField(
            model_name="generation",
            name="kind",
            field=models.CharField(
                choices=[
                    ("chat", "chat answer"),
                    ("image", "image generation"),
                    ("speech", "read aloud"),
                    ("title", "conversation title"),
                    ("transcription", "voice input"),
                    ("embedding", "embedding"),
                ],
                default="chat",
                max_length=16,
            ),
        ),
        migrations.AlterField(
            model_name="ledgerday",
            name="kind",
            field=models.CharField(
                choices=[
                    ("chat", "chat answer"),
                    ("image", "image generation"),
                    ("speech", "read aloud"),
                    ("title", "conversation title"),
                    ("transcription", "voice input"),
                    ("embedding", "embedding"),
                ],
                max_length=16,
            ),
        ),
        migrations.RunPython(emulator_transcribes, migrations.RunPython.noop),
    ]
