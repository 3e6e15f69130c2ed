from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("chatapp", "0031_provider_identity_plural")]

    operations = [
        migrations.CreateModel(
            name="SharedVersion",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("token", models.CharField(max_length=32)),
            ],
        ),
    ]
