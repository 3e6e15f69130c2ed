"""Websocket URL routes."""

from __future__ import annotations

from django.urls import path

from chatapp.ws.consumer import ChatConsumer

websocket_urlpatterns = [
    path("ws/chat/", ChatConsumer.as_asgi()),
]
