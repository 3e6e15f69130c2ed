"""The `STATIC_ROOT` a test's server starts with: `collectstatic`'s output for these static files.

Every server refuses to start without its collected files (`chatapp.static_files`), and a
collect takes 10 s or more (brotli at its best on every admin file): it is made once for each
content of the static files and kept in the temporary directory, shared by every worker and
every run (a lock lets one worker make it while the others wait).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from functools import cache
from importlib.metadata import version
from pathlib import Path

from django.contrib.staticfiles import finders

ROOT = Path(__file__).resolve().parents[1]
_PARENT = Path(tempfile.gettempdir())
_PREFIX = "gateway-chat-static-"
_UNUSED_FOR = 24 * 3600  # seconds after which another content's collect is deleted


@cache
def collected_static_root() -> Path:
    root = _PARENT / f"{_PREFIX}{_digest()}"
    with (_PARENT / f"{_PREFIX}lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "staticfiles.json").exists():
            _collect(root)
            _delete_unused(keep=root)
    os.utime(root)
    return root


def _digest() -> str:
    """Of every static file's name and content, and what collects them."""
    digest = hashlib.sha256(f"{version('django')} {version('whitenoise')}".encode())
    digest.update((ROOT / "chatapp" / "static_files.py").read_bytes())
    found = {}
    for finder in finders.get_finders():
        for path, storage in finder.list(["CVS", ".*", "*~"]):
            found.setdefault(f"{getattr(storage, 'prefix', None)}/{path}", storage.path(path))
    for name, path in sorted(found.items()):
        digest.update(name.encode() + b"\0" + Path(path).read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _collect(root: Path) -> None:
    partial = root.with_name(root.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "chatapp.settings",
        "DJANGO_SECRET_KEY": "collectstatic-for-tests",
        "DJANGO_STATIC_ROOT": str(partial),
    }
    subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "collectstatic", "--noinput", "-v", "0"],
        env=env,
        cwd=ROOT,
        check=True,
        stdin=subprocess.DEVNULL,
        timeout=300,
    )
    partial.rename(root)


def _delete_unused(keep: Path) -> None:
    for other in _PARENT.glob(f"{_PREFIX}*"):
        if other.is_dir() and other != keep and other.stat().st_mtime < time.time() - _UNUSED_FOR:
            shutil.rmtree(other, ignore_errors=True)
