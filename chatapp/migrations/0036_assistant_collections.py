from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("chatapp", "0035_generation_passages")]

    operations = [
        migrations.AddField(
            model_name="assistant",
            name="collections",
            field=models.ManyToManyField(
                blank=True,
                help_text="Collections every answer in a chat started with it draws on.",
                related_name="+",
                to="chatapp.collection",
            ),
        ),
    ]
