from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("chatapp", "0034_knowledge_embeddings")]

    operations = [
        migrations.AddField(
            model_name="generation",
            name="passages",
            field=models.JSONField(blank=True, default=list),
        ),
    ]
