"""The OpenID Connect provider of tests/oidc/provider.mjs, in a Node process of its own.

Installed by `make oidc-provider` (`npm ci` into tests/oidc/node_modules); a test that needs it
skips, saying why, when Node is missing, the install was not run, or npm's registry could not be
reached when it was.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from deploy.processes import stop

HERE = Path(__file__).resolve().parent
NODE = "/usr/bin/node"
CLIENT_ID = "gateway-chat"
CLIENT_SECRET = "provider-test-secret-4f1c"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def skip_unless_installed() -> None:
    modules = HERE / "node_modules"
    if not Path(NODE).exists():
        pytest.skip(f"{NODE} is not installed (make test-packages)")
    if (modules / ".unreachable").exists():
        pytest.skip((modules / ".unreachable").read_text().strip())
    if not (modules / ".installed").exists():
        pytest.skip("the test OpenID Connect provider is not installed (make oidc-provider)")


@dataclass(frozen=True)
class Provider:
    issuer: str

    def set(self, **state: Any) -> None:
        """Replace parts of the provider's test state: `users` (login -> claims), `mode`."""
        request = urllib.request.Request(
            f"{self.issuer}/__test__/state", data=json.dumps(state).encode(), method="PUT"
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()


@contextlib.contextmanager
def running(port: int, redirect_uri: str, log: Path) -> Iterator[Provider]:
    """The provider on `port`, its one client allowed to come back to `redirect_uri`."""
    skip_unless_installed()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [NODE, str(HERE / "provider.mjs"), str(port), CLIENT_ID, CLIENT_SECRET, redirect_uri],
            cwd=HERE,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"the provider exited:\n{log.read_text()}")
                with socket.socket() as sock:
                    if sock.connect_ex(("127.0.0.1", port)) == 0:
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the provider did not start:\n{log.read_text()}")
                time.sleep(0.05)
            yield Provider(f"http://127.0.0.1:{port}")
        finally:
            stop(process)
