"""Mermaid fetched as the lock pins it (`chatapp.static_vendor`): the tarball the lock names,
checked against its integrity before it is read, one file extracted; nothing done when it is in
place; an unreachable registry reported, not fatal."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from chatapp import static_vendor
from chatapp.static_vendor import MERMAID, ensure_vendored, locked

SCRIPT = b"globalThis.mermaid = {};\n"


def tarball(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return out.getvalue()


def lock_for(
    path: Path, body: bytes, url: str = "https://registry.npmjs.org/mermaid/-/m.tgz"
) -> Path:
    integrity = "sha512-" + base64.b64encode(hashlib.sha512(body).digest()).decode()
    entry = {"version": "1.2.3", "resolved": url, "integrity": integrity}
    path.write_text(json.dumps({"packages": {"node_modules/mermaid": entry}}))
    return path


@pytest.fixture
def downloads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    asked: list[str] = []
    monkeypatch.setattr(static_vendor, "_download", lambda url: asked.append(url) or BODY)
    return asked


BODY = tarball({MERMAID.member: SCRIPT, "package/README.md": b"readme"})


def test_the_locked_tarball_is_checked_and_its_file_extracted_once(
    tmp_path: Path, downloads: list[str]
) -> None:
    lock = lock_for(tmp_path / "package-lock.json", BODY)
    assert ensure_vendored(MERMAID, tmp_path / "static", lock)
    assert (tmp_path / "static" / MERMAID.static_path).read_bytes() == SCRIPT
    assert downloads == ["https://registry.npmjs.org/mermaid/-/m.tgz"]
    assert ensure_vendored(MERMAID, tmp_path / "static", lock)
    assert len(downloads) == 1, "in place for the locked version: not fetched again"
    found = sorted(p.name for p in (tmp_path / "static" / "vendor" / "mermaid").iterdir())
    assert found == [".mermaid.min.js.integrity", "mermaid.min.js"]  # the stamp is not collected


def test_a_tarball_that_does_not_match_the_lock_is_refused(
    tmp_path: Path, downloads: list[str]
) -> None:
    lock = lock_for(tmp_path / "package-lock.json", BODY + b"changed")
    with pytest.raises(ValueError, match="does not match the lock's integrity"):
        ensure_vendored(MERMAID, tmp_path / "static", lock)
    assert not (tmp_path / "static" / MERMAID.static_path).exists()


def test_only_a_registry_tarball_with_a_sha512_is_accepted(tmp_path: Path) -> None:
    lock = lock_for(tmp_path / "package-lock.json", BODY, url="https://elsewhere.example/m.tgz")
    with pytest.raises(ValueError, match="a registry tarball with a sha512"):
        locked("mermaid", lock)


def test_an_unreachable_registry_is_reported_and_diagrams_show_as_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    def unreachable(url: str) -> bytes:
        raise OSError("Name or service not known")

    monkeypatch.setattr(static_vendor, "_download", unreachable)
    lock = lock_for(tmp_path / "package-lock.json", BODY)
    assert not ensure_vendored(MERMAID, tmp_path / "static", lock)
    assert "npm's registry could not be reached" in capsys.readouterr().err
    assert not (tmp_path / "static" / MERMAID.static_path).exists()


def test_the_repository_lock_pins_mermaid_from_the_registry() -> None:
    pin = locked("mermaid")
    manifest = json.loads((static_vendor.LOCK.parent / "package.json").read_text())
    assert manifest["dependencies"]["mermaid"] == pin.version
    assert pin.resolved == f"https://registry.npmjs.org/mermaid/-/mermaid-{pin.version}.tgz"
