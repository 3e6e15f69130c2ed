"""The browser libraries the pages load from our own static files, fetched from npm's registry.

Mermaid (which draws an answer's diagrams) is a dependency, not our code: `static_vendor/`
holds its `package.json` and `package-lock.json`, and this module downloads the exact tarball the
lock names (`resolved`), checks it against the lock's `integrity` (sha512) before reading a byte
of it, and extracts the one file the pages load into `static/vendor/`, which git ignores. So a
fresh machine needs no Node: `make install` and `manage.py prepare` (which `make run` runs) call
`ensure_vendored`, which does nothing when the file is there for the locked version.

When the registry cannot be reached it says so and returns: the app works without diagrams,
showing their source as code (`chatapp/views/code_frames.py` tells the page).

Standard library only: `make install` runs it before anything else could be relied on.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import sys
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MERMAID", "VendoredFile", "ensure_vendored", "locked"]

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "static_vendor" / "package-lock.json"
REGISTRY = "https://registry.npmjs.org/"
TIMEOUT = 30  # seconds for the connection and each read
MAX_TARBALL = 64 * 1024 * 1024  # bytes; mermaid 12's is 28 MB


@dataclass(frozen=True, slots=True)
class VendoredFile:
    package: str  # its npm name, as the lock lists it
    member: str  # the file's path in the tarball
    static_path: str  # where it goes, under `static/` (the name pages ask the storage for)


MERMAID = VendoredFile("mermaid", "package/dist/mermaid.min.js", "vendor/mermaid/mermaid.min.js")


@dataclass(frozen=True, slots=True)
class Locked:
    version: str
    resolved: str
    integrity: str


def locked(package: str, lock: Path = LOCK) -> Locked:
    """What the lock pins `package` to; only a tarball on npm's registry is accepted."""
    entry = json.loads(lock.read_text())["packages"][f"node_modules/{package}"]
    resolved = entry["resolved"]
    if not resolved.startswith(REGISTRY) or not entry["integrity"].startswith("sha512-"):
        raise ValueError(f"{package}: the lock must name a registry tarball with a sha512")
    return Locked(entry["version"], resolved, entry["integrity"])


def _stamp(target: Path) -> Path:
    # A dot file: the static finders and collectstatic leave it out.
    return target.with_name(f".{target.name}.integrity")


def ensure_vendored(
    wanted: VendoredFile = MERMAID, static_dir: Path = ROOT / "static", lock: Path = LOCK
) -> bool:
    """Whether `wanted` is in place for the locked version: fetched now if it was not. False
    (with the reason printed) when the registry could not be reached."""
    pin = locked(wanted.package, lock)
    target = static_dir / wanted.static_path
    stamp = _stamp(target)
    if target.exists() and stamp.exists() and stamp.read_text() == pin.integrity:
        return True
    try:
        tarball = _download(pin.resolved)
    except OSError as error:
        print(
            f"npm's registry could not be reached ({error}): {wanted.package} {pin.version} is "
            "not installed, and answers' diagrams show as code.",
            file=sys.stderr,
        )
        return False
    algorithm, _, expected = pin.integrity.partition("-")
    digest = base64.b64encode(hashlib.new(algorithm, tarball).digest()).decode()
    if digest != expected:
        raise ValueError(f"{pin.resolved} does not match the lock's integrity")
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as archive:
        member = archive.extractfile(wanted.member)
        if member is None:
            raise ValueError(f"{pin.resolved} holds no file {wanted.member}")
        content = member.read()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    partial.write_bytes(content)
    partial.replace(target)
    stamp.write_text(pin.integrity)
    print(f"{wanted.package} {pin.version}: {wanted.member} → static/{wanted.static_path}")
    return True


def _download(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=TIMEOUT) as response:  # a registry URL (locked())
        body: bytes = response.read(MAX_TARBALL + 1)
    if len(body) > MAX_TARBALL:
        raise ValueError(f"{url} is larger than {MAX_TARBALL} bytes")
    return body


if __name__ == "__main__":
    ensure_vendored()
