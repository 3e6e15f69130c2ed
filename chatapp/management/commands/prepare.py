"""What `make run` does before it serves, in one Django start and only what has something to do:
the migrations not yet applied, the first admin account (`ensure_admin`), Mermaid's file when it
is missing (`chatapp.static_vendor`), and `collectstatic` when the static files changed since the
last collect.

Three `manage.py` runs took 20 s before a second `make run` answered on a busy two-core machine,
each starting Django (about 7 s there) to find nothing to do, and the collect compressing every
file again (brotli at its best, 10 s or more). Whether the static files changed is told by a
stamp in `STATIC_ROOT`: every found file's name, size and modification time, and the versions
of what collects them.
"""

from __future__ import annotations

import hashlib
from importlib.metadata import version
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor

from chatapp.static_vendor import ensure_vendored

STAMP = ".collected"


def static_fingerprint() -> str:
    """Of every static file the finders find (name, size, modification time) and of what
    collects them: changed by any edit, cheap enough to read on every start."""
    digest = hashlib.sha256(f"{version('django')} {version('whitenoise')}".encode())
    digest.update((Path(settings.BASE_DIR) / "chatapp" / "static_files.py").read_bytes())
    found: dict[str, str] = {}
    for finder in finders.get_finders():
        for path, storage in finder.list(["CVS", ".*", "*~"]):
            found.setdefault(f"{getattr(storage, 'prefix', None)}/{path}", storage.path(path))
    for name, path in sorted(found.items()):
        stat = Path(path).stat()
        digest.update(f"{name}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    return digest.hexdigest()


class Command(BaseCommand):
    help = "Migrate, make the first admin and collect the static files, each only if needed."

    def handle(self, *args: Any, **options: Any) -> None:
        executor = MigrationExecutor(connections[DEFAULT_DB_ALIAS])
        if executor.migration_plan(executor.loader.graph.leaf_nodes()):
            call_command("migrate", interactive=False)
        call_command("ensure_admin")
        ensure_vendored()
        root = Path(settings.STATIC_ROOT)
        fingerprint = static_fingerprint()
        stamp = root / STAMP
        if stamp.exists() and stamp.read_text() == fingerprint:
            return
        call_command("collectstatic", interactive=False, verbosity=0)
        stamp.write_text(fingerprint)
