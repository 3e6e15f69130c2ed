"""Serve the emulator with uvicorn: in a background thread for tests, or in the foreground.

`serve_in_thread` binds a free port itself (so the URL is known before the thread starts), runs
uvicorn's server on its own event loop in a daemon thread, waits until it accepts connections,
and yields the base URL. The URL is a `str` subclass that also carries the `app`, so a test can
read generation records directly: `url.app.records.get(generation_id)`.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn

from .app import EmulatorApp
from .options import Options

__all__ = ["EmulatorURL", "create_app", "serve", "serve_in_thread"]

_START_TIMEOUT_S = 10.0


class EmulatorURL(str):
    """`"http://127.0.0.1:PORT"`, plus the running `app` for direct access to its records."""

    app: EmulatorApp

    def __new__(cls, url: str, app: EmulatorApp) -> EmulatorURL:
        self = super().__new__(cls, url)
        self.app = app
        return self


def create_app(
    *,
    tokens_per_second: float = 40.0,
    ttft_ms: int = 400,
    prefix: str = "",
    request_options: bool = False,
    **options: Any,
) -> EmulatorApp:
    """The emulator ASGI app. Extra keyword options are `Options` fields, e.g.
    `keepalive_interval_s`, `slow_start_s`, `stall_limit_s`, `finalize_delay_ms`;
    `request_options` lets each request set them for itself (tests: see `options`)."""
    settings = Options(tokens_per_second=tokens_per_second, ttft_ms=ttft_ms, **options)
    return EmulatorApp(settings, prefix=prefix, request_options=request_options)


def _config(
    app: EmulatorApp, host: str, port: int, *, log_level: str = "warning"
) -> uvicorn.Config:
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=None,
        log_level=log_level,
        access_log=log_level == "info",
        lifespan="on",
        timeout_graceful_shutdown=1,
    )


@contextlib.contextmanager
def serve_in_thread(
    *, host: str = "127.0.0.1", port: int = 0, **create_app_options: Any
) -> Iterator[EmulatorURL]:
    """Run the emulator on `host:port` (0 = a free port) until the block exits."""
    app = create_app(**create_app_options)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.setblocking(False)
    bound_port = sock.getsockname()[1]
    server = uvicorn.Server(_config(app, host, bound_port))
    failure: list[BaseException] = []

    def run() -> None:
        try:
            server.run(sockets=[sock])
        except BaseException as exc:  # surfaced to the caller below
            failure.append(exc)

    thread = threading.Thread(target=run, name=f"gateway-emulator-{bound_port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + _START_TIMEOUT_S
    while not server.started:
        if failure or not thread.is_alive():
            sock.close()
            cause = failure[0] if failure else None
            raise RuntimeError("the gateway emulator failed to start") from cause
        if time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError("the gateway emulator did not start in time")
        time.sleep(0.005)
    try:
        yield EmulatorURL(f"http://{host}:{bound_port}", app)
    finally:
        app.close_streams()
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def serve(app: EmulatorApp, *, host: str, port: int) -> None:
    """Run `app` in the foreground until interrupted."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    uvicorn.Server(_config(app, host, port, log_level="info")).run()
