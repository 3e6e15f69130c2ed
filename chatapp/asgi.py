"""ASGI entry point: Django for HTTP, the conversation consumer for websockets.

Static files are served by the app itself (no CDN, no separate web server for a self-hosted
install), before Django and its middleware, from the files `collectstatic` wrote: hashed names
cached for a year, pre-compressed (`static_files.py`); a path that leaves the static directories
(`..`, an absolute path, a NUL byte) is a plain 404. Until they are collected, every request
is a 503 saying to run collectstatic.
Websockets pass the exact-origin check (`ws/origin.py`) and the session auth stack; the consumer
itself refuses anonymous users and conversations they do not own.

At shutdown the process's gateway clients are closed: Daphne speaks no ASGI lifespan, so there a
Twisted shutdown trigger does it; servers that do (uvicorn) get a lifespan handler. Under Daphne
the websockets also negotiate permessage-deflate, and one whose browser stops reading is closed
before its backlog grows without bound (`patches/daphne_websockets.py`), a request body past
its route's limit is refused while it arrives (`patches/daphne_bodies.py`), and the render
processes start with the server.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatapp.settings")
django_asgi_app = get_asgi_application()  # before importing code that touches models

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from chatapp.gateways.clients import close_clients  # noqa: E402
from chatapp.patches import daphne_bodies, daphne_websockets  # noqa: E402
from chatapp.static_files import StaticFiles  # noqa: E402
from chatapp.ws.origin import SameOriginValidator  # noqa: E402
from chatapp.ws.routing import websocket_urlpatterns  # noqa: E402


async def lifespan(scope: dict[str, Any], receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await close_clients()
            await send({"type": "lifespan.shutdown.complete"})
            return


def _close_clients_when_daphne_stops() -> None:
    if "daphne.server" not in sys.modules:  # not under Daphne: never install a reactor here
        return
    from twisted.internet import defer, reactor

    def before_shutdown() -> defer.Deferred[None]:
        return defer.Deferred.fromFuture(asyncio.ensure_future(close_clients()))

    # Twisted's interfaces are zope interfaces, whose methods mypy reads as taking no `self`.
    reactor.addSystemEventTrigger("before", "shutdown", before_shutdown)  # type: ignore[arg-type]


def _warm_render_pool_under_daphne() -> None:
    """A server's render processes start with it, in the background: a new process takes a
    second or more to import the renderer, which the first answer's blocks and drafts would
    otherwise wait for (its raw markdown showed for a second)."""
    if "daphne.server" not in sys.modules:  # imported by a test or a script: started on use
        return
    from chatapp.rendering import pool as render_pool

    render_pool.warm()


_close_clients_when_daphne_stops()
_warm_render_pool_under_daphne()
daphne_websockets.enable()
daphne_bodies.enable()

application = ProtocolTypeRouter(
    {
        "http": StaticFiles(django_asgi_app),
        "websocket": SameOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
        "lifespan": lifespan,
    }
)
