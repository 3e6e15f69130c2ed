"""ASGI entry point: Django for HTTP, the conversation consumer for websockets.

Static files are served by the app itself (no CDN, no separate web server for a self-hosted
install). Websockets pass the allowed-hosts origin check and the session auth stack; the consumer
itself refuses anonymous users and conversations they do not own.
"""

from __future__ import annotations

import os

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "chatapp.settings")
django_asgi_app = get_asgi_application()  # before importing code that touches models

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from .routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": ASGIStaticFilesHandler(django_asgi_app),
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
