"""Create the first admin account, once, so `make run` ends with someone able to sign in.

Uses `DJANGO_SUPERUSER_USERNAME` / `DJANGO_SUPERUSER_PASSWORD` when set; otherwise generates a
password and prints it this one time (it is stored only as a hash). Does nothing when any
superuser exists, so running it on every start is safe.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the admin account on first run (from the environment, or print a password)."

    def handle(self, *args: Any, **options: Any) -> None:
        User = get_user_model()
        if User.objects.filter(is_superuser=True).exists():
            self.stdout.write("An admin account exists; nothing to do.")
            return
        username = os.environ.get("DJANGO_SUPERUSER_USERNAME") or "admin"
        password = os.environ.get("DJANGO_SUPERUSER_PASSWORD")
        generated = not password
        if generated:
            password = secrets.token_urlsafe(12)
        User.objects.create_superuser(username=username, email="", password=password)
        if generated:
            self.stdout.write(
                self.style.WARNING(
                    f"Created admin account {username!r} with password: {password}\n"
                    "This password is shown only once; change it in the admin."
                )
            )
        else:
            self.stdout.write(f"Created admin account {username!r}.")
