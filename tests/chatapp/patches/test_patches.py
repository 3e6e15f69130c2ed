"""Canaries for `chatapp/patches` and for the WhiteNoise internals `chatapp/static_files.py` uses:
each pins the library internals one of them relies on.

They pin shapes and behaviours, never version numbers: an upgrade that leaves what we lean on
alone passes, and one that changes it fails here, by name, rather than in production as a thread
hop per hook again, a session saved on the event loop, a socket that neither deflates nor pushes
back, or a channel layer whose queues no longer hold what ours puts in them.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import socket
import textwrap
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import daphne.http_protocol
import daphne.server
import pytest
from autobahn.exception import PayloadExceededError
from autobahn.twisted.websocket import WebSocketServerFactory, WebSocketServerProtocol
from autobahn.websocket.compress import (
    PerMessageDeflate,
    PerMessageDeflateOffer,
    PerMessageDeflateOfferAccept,
)
from channels.layers import InMemoryChannelLayer
from daphne.ws_protocol import WebSocketFactory, WebSocketProtocol
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.messages.storage.base import BaseStorage
from django.contrib.sessions.backends.base import SessionBase
from django.contrib.sessions.middleware import SessionMiddleware
from django.core.handlers.base import BaseHandler
from django.http import HttpRequest, HttpResponse, HttpResponseBase, StreamingHttpResponse
from django.middleware.csrf import CsrfViewMiddleware, _get_new_csrf_string
from django.test import RequestFactory
from django.utils.deprecation import MiddlewareMixin
from django.utils.functional import SimpleLazyObject
from twisted.internet import tcp
from twisted.internet.abstract import FileDescriptor
from twisted.internet.testing import StringTransport

from chatapp.patches import daphne_bodies, daphne_websockets, inline_middleware
from chatapp.patches.channel_layer import LocalChannelLayer


def source_tree(function: Callable[..., Any]) -> ast.AST:
    return ast.parse(textwrap.dedent(inspect.getsource(function)))


def self_attributes(tree: ast.AST) -> set[str]:
    """The `self.<name>` attributes a function reads or calls."""
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    }


def calls_of(tree: ast.AST, name: str) -> list[ast.Call]:
    """The calls of `name` (a plain name, or an attribute of that name) in `tree`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if (isinstance(func, ast.Name) and func.id == name) or (
                isinstance(func, ast.Attribute) and func.attr == name
            ):
                found.append(node)
    return found


# --- inline_middleware ----------------------------------------------------------------------------

INLINE = {
    inline_middleware.GZip: {"process_response"},
    inline_middleware.Security: {"process_request", "process_response"},
    inline_middleware.ContentSecurityPolicy: {"process_request", "process_response"},
    inline_middleware.Session: {"process_request", "process_response"},
    inline_middleware.Common: {"process_request", "process_response"},
    inline_middleware.Csrf: {"process_request", "process_view", "process_response"},
    inline_middleware.Authentication: {"process_request"},
    inline_middleware.Messages: {"process_request", "process_response"},
    inline_middleware.XFrameOptions: {"process_response"},
}
HOOKS = (
    "process_request",
    "process_view",
    "process_response",
    "process_exception",
    "process_template_response",
)


async def a_view(request: HttpRequest) -> HttpResponseBase:
    return HttpResponse()


def test_middleware_mixins_acall_runs_the_two_hooks_inline_hooks_runs() -> None:
    """`InlineHooks.__acall__` replaces Django's: Django's must run the same hooks, no more, each
    only when the middleware has it, around `get_response`."""
    django = source_tree(MiddlewareMixin.__acall__)
    assert list(inspect.signature(MiddlewareMixin.__acall__).parameters) == ["self", "request"]
    assert self_attributes(django) == {"process_request", "get_response", "process_response"}
    checked = {call.args[1].value for call in calls_of(django, "hasattr")}
    assert checked == {"process_request", "process_response"}
    # Each hook is a thread hop there: the cost InlineHooks exists to save.
    assert len(calls_of(django, "sync_to_async")) == 2


async def test_an_async_request_reaches_our_acall_and_runs_the_hooks_on_the_loop() -> None:
    """Django's `__call__` hands an async-mode middleware's request to `self.__acall__`: ours,
    which calls the hooks on the loop's thread, not in `sync_to_async`'s."""
    threads: list[int] = []

    class Probe(inline_middleware.InlineHooks, MiddlewareMixin):
        def process_request(self, request: HttpRequest) -> None:
            threads.append(threading.get_ident())

        def process_response(
            self, request: HttpRequest, response: HttpResponseBase
        ) -> HttpResponseBase:
            threads.append(threading.get_ident())
            return response

    middleware = Probe(a_view)
    assert middleware.async_mode
    response = await middleware(RequestFactory().get("/"))
    assert response.status_code == 200
    assert threads == [threading.get_ident()] * 2


@pytest.mark.parametrize("ours", INLINE, ids=lambda cls: cls.__name__)
def test_each_django_middleware_has_the_hooks_we_expect(ours: type[Any]) -> None:
    """Our `__acall__` runs request and response hooks; Django's handler runs `process_view`
    (and the exception and template hooks) itself, in a thread unless the hook is async. A hook
    that appears or goes would change what runs where."""
    django = ours.__mro__[2]
    assert ours.__mro__[1] is inline_middleware.InlineHooks
    assert issubclass(django, MiddlewareMixin)
    assert {hook for hook in HOOKS if hasattr(django, hook)} == INLINE[ours]
    assert "__call__" not in vars(django)
    assert "__acall__" not in vars(django)


def test_the_handler_leaves_an_async_process_view_as_it_is() -> None:
    """`Csrf.process_view` is async so that the handler calls it on the loop; a sync one (as
    Django's own) is the one it wraps in `sync_to_async`."""
    handler = BaseHandler()
    ours = inline_middleware.Csrf(a_view).process_view
    djangos = CsrfViewMiddleware(a_view).process_view
    assert handler.adapt_method_mode(True, ours) == ours
    assert handler.adapt_method_mode(True, djangos) != djangos
    load = source_tree(BaseHandler.load_middleware)
    adapted = [call.args[1] for call in calls_of(load, "adapt_method_mode") if len(call.args) > 1]
    assert any(isinstance(arg, ast.Attribute) and arg.attr == "process_view" for arg in adapted)


class Tripwire(SessionBase):
    """A session store that records its saves and holds nothing: loading it reads no database."""

    def __init__(self, session_key: str | None = None) -> None:
        super().__init__(session_key)
        self.saves = 0
        self.loads = 0

    def load(self) -> dict[str, Any]:
        self.loads += 1
        return {}

    def exists(self, session_key: str) -> bool:
        return False

    def create(self) -> None:
        self._session_key = self._get_new_session_key()

    def save(self, must_create: bool = False) -> None:
        self.saves += 1

    def delete(self, session_key: str | None = None) -> None:
        pass


KEY = "k" * 32


def untouched(session: Tripwire) -> None:
    pass


def read(session: Tripwire) -> None:
    session.get("anything")


def written(session: Tripwire) -> None:
    session["anything"] = 1


def flagged(session: Tripwire) -> None:
    session.modified = True  # Django's documented way to force a save


def flushed(session: Tripwire) -> None:
    session["anything"] = 1
    session.flush()


@pytest.mark.parametrize("save_every_request", [False, True])
@pytest.mark.parametrize("from_cookie", [False, True])
@pytest.mark.parametrize("use", [untouched, read, written, flagged, flushed])
def test_session_needs_a_thread_exactly_when_django_saves(
    settings: Any, save_every_request: bool, from_cookie: bool, use: Callable[[Tripwire], None]
) -> None:
    """`SessionMiddleware.process_response` saves (I/O) only when the session was modified, or
    every request is saved, and it is not empty; otherwise it sets headers at most. `Session`
    runs it inline exactly then."""
    settings.SESSION_SAVE_EVERY_REQUEST = save_every_request
    request = RequestFactory().get("/")
    if from_cookie:
        request.COOKIES[settings.SESSION_COOKIE_NAME] = KEY
    session = Tripwire(KEY if from_cookie else None)
    use(session)
    request.session = session
    needs_thread = inline_middleware.Session(a_view).needs_thread(request)
    SessionMiddleware(a_view).process_response(request, HttpResponse())
    assert needs_thread == (session.saves > 0)


def test_an_untouched_session_is_neither_loaded_nor_saved(settings: Any) -> None:
    """The common case the patch is for: a request that never reads its session costs no I/O."""
    request = RequestFactory().get("/")
    request.COOKIES[settings.SESSION_COOKIE_NAME] = KEY
    request.session = session = Tripwire(KEY)
    SessionMiddleware(a_view).process_response(request, HttpResponse())
    assert (session.loads, session.saves) == (0, 0)


class RecordingStorage(BaseStorage):
    def __init__(self, request: HttpRequest) -> None:
        super().__init__(request)
        self.stores = 0

    def _get(self, *args: Any, **kwargs: Any) -> tuple[list[Any], bool]:
        return [], True

    def _store(self, messages: list[Any], response: HttpResponseBase, *args: Any) -> list[Any]:
        self.stores += 1
        return []


@pytest.mark.parametrize("use", ["untouched", "iterated", "added"])
def test_messages_need_a_thread_exactly_when_django_stores_them(use: str) -> None:
    """`BaseStorage.update` (from `MessageMiddleware.process_response`) stores, which may write
    the session, only when the messages were read or added to."""
    request = RequestFactory().get("/")
    storage = RecordingStorage(request)
    if use == "iterated":
        list(storage)
    elif use == "added":
        storage.add(20, "hello")
    request._messages = storage
    needs_thread = inline_middleware.Messages(a_view).needs_thread(request)
    MessageMiddleware(a_view).process_response(request, HttpResponse())
    assert needs_thread == (storage.stores > 0)


def test_the_request_hooks_leave_the_session_unread(settings: Any) -> None:
    """Run inline, the request hooks must not load the session: Authentication puts a lazy user
    on the request, Messages a storage that reads nothing yet, and Csrf checks the token against
    the cookie."""
    assert settings.CSRF_USE_SESSIONS is False
    token = _get_new_csrf_string()
    request = RequestFactory().post("/", HTTP_X_CSRFTOKEN=token)
    request.COOKIES[settings.CSRF_COOKIE_NAME] = token
    request.session = session = Tripwire(KEY)
    inline_middleware.Authentication(a_view).process_request(request)
    inline_middleware.Messages(a_view).process_request(request)
    csrf = CsrfViewMiddleware(a_view)
    csrf.process_request(request)
    assert csrf.process_view(request, a_view, (), {}) is None  # the token passed
    assert isinstance(request.user, SimpleLazyObject)
    assert callable(request.auser)
    assert not session.accessed
    assert session.loads == 0


PAGE = b"<!doctype html><title>A page</title>" + b"<p>Hello, world.</p>" * 50


async def a_page(request: HttpRequest) -> HttpResponseBase:
    return HttpResponse(PAGE)


async def test_gzip_compresses_a_page_on_the_loop_with_djangos_breach_padding() -> None:
    threads: list[int] = []

    async def view(request: HttpRequest) -> HttpResponseBase:
        threads.append(threading.get_ident())
        return HttpResponse(PAGE)

    request = RequestFactory().get("/", HTTP_ACCEPT_ENCODING="gzip, deflate, br")
    response = await inline_middleware.GZip(view)(request)
    assert threads == [threading.get_ident()]
    assert response["Content-Encoding"] == "gzip"
    assert "Accept-Encoding" in response["Vary"]
    body = response.content
    assert zlib.decompress(body, wbits=31) == PAGE
    assert body[3] & 0x08  # FNAME: the random bytes Django writes against BREACH
    assert response["Content-Length"] == str(len(body))


async def test_gzip_leaves_a_page_as_it_is_for_a_client_that_does_not_accept_it() -> None:
    response = await inline_middleware.GZip(a_page)(RequestFactory().get("/"))
    assert "Content-Encoding" not in response
    assert "Accept-Encoding" in response["Vary"]
    assert response.content == PAGE


async def test_gzip_leaves_a_streaming_response_to_flush_each_piece() -> None:
    async def pieces() -> Any:
        yield b"one"
        yield b"two"

    async def view(request: HttpRequest) -> HttpResponseBase:
        return StreamingHttpResponse(pieces())

    request = RequestFactory().get("/", HTTP_ACCEPT_ENCODING="gzip")
    response = await inline_middleware.GZip(view)(request)
    assert "Content-Encoding" not in response
    assert [piece async for piece in response] == [b"one", b"two"]


# --- daphne_bodies -------------------------------------------------------------------------------


class StandInServer:
    """What Daphne's request reads of its server before the application is called."""

    proxy_forwarded_address_header = None
    root_path = ""
    request_buffer_size = 8192

    def __init__(self) -> None:
        self.scopes: list[dict[str, Any]] = []

    def protocol_connected(self, request: Any) -> None:
        pass

    def protocol_disconnected(self, request: Any) -> None:
        pass

    def create_application(self, request: Any, scope: dict[str, Any]) -> None:
        self.scopes.append(scope)  # None: Daphne takes the request as abandoned


class HalfClosingTransport(StringTransport):
    write_closed = False

    def loseWriteConnection(self) -> None:
        self.write_closed = True


@pytest.fixture
def daphne_channel(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, StringTransport]]:
    """Daphne's HTTP channel as its factory builds it, the bodies patch on, over a transport
    that keeps what is written; `server.scopes` the requests that reached the application."""
    monkeypatch.setattr(daphne.http_protocol, "WebRequest", daphne.http_protocol.WebRequest)
    monkeypatch.setattr(daphne_bodies, "call_later", lambda delay, function: None)
    daphne_bodies.enable()
    server = StandInServer()
    channel = daphne.http_protocol.HTTPFactory(server).buildProtocol(None)
    transport = HalfClosingTransport()
    channel.makeConnection(transport)
    channel.server = server
    yield channel, transport
    channel.connectionLost(None)


def head(path: str, *lines: str) -> bytes:
    return "\r\n".join([f"POST {path} HTTP/1.1", "Host: x", *lines, "", ""]).encode()


def test_daphne_builds_its_requests_from_the_class_enable_replaces(
    daphne_channel: tuple[Any, StringTransport],
) -> None:
    channel, _ = daphne_channel
    assert channel._channel.requestFactory.limits_bodies


def test_a_length_past_the_limit_is_answered_413_with_no_100_continue(
    daphne_channel: tuple[Any, StringTransport],
) -> None:
    channel, transport = daphne_channel
    channel.dataReceived(
        head("/accounts/login/?next=/", "Content-Length: 1000000", "Expect: 100-continue")
    )
    channel.dataReceived(b"x" * 100_000)  # dropped

    written = transport.value()
    assert written.startswith(b"HTTP/1.1 413 Content Too Large\r\n")
    assert b"100 Continue" not in written
    assert b"at most 64.0 KB for a sign-in form" in written
    assert transport.write_closed  # what the client goes on sending is read and dropped
    assert channel.factory.server.scopes == []


def test_a_chunked_body_is_refused_once_past_the_limit(
    daphne_channel: tuple[Any, StringTransport],
) -> None:
    channel, transport = daphne_channel
    channel.dataReceived(head("/accounts/login/", "Transfer-Encoding: chunked"))
    chunk = b"%x\r\n%s\r\n" % (40_000, b"x" * 40_000)
    channel.dataReceived(chunk)
    assert transport.value() == b""  # 40,000 bytes: within the limit
    channel.dataReceived(chunk + b"0\r\n\r\n")

    assert transport.value().startswith(b"HTTP/1.1 413 Content Too Large\r\n")
    assert channel.factory.server.scopes == []


def test_a_body_within_the_limit_reaches_the_application_whole(
    daphne_channel: tuple[Any, StringTransport],
) -> None:
    channel, transport = daphne_channel
    channel.dataReceived(head("/accounts/login/", "Content-Length: 5") + b"a=b&c")

    assert transport.value() == b""
    (scope,) = channel.factory.server.scopes
    assert scope["path"] == "/accounts/login/"
    assert channel._channel.requests[-1].content.getvalue() == b"a=b&c"


# --- daphne_websockets ----------------------------------------------------------------------------


def daphne_source(module: str) -> ast.Module:
    spec = find_spec(f"daphne.{module}")
    assert spec is not None
    assert spec.origin is not None
    return ast.parse(Path(spec.origin).read_text())


def test_daphne_builds_its_factory_by_the_name_enable_replaces() -> None:
    """`enable()` swaps `daphne.server.WebSocketFactory`: Daphne must import it there and look
    it up when its server runs (not hold the class from before), then set its options with
    `setProtocolOptions`, leaving `perMessageCompressionAccept` to our default."""
    server = daphne_source("server")
    imported = [
        node
        for node in ast.walk(server)
        if isinstance(node, ast.ImportFrom)
        and node.module == "ws_protocol"
        and "WebSocketFactory" in {alias.name for alias in node.names}
    ]
    assert imported
    (run,) = [
        node
        for node in ast.walk(server)
        if isinstance(node, ast.FunctionDef) and node.name == "run"
    ]
    assert [call for call in calls_of(run, "WebSocketFactory") if isinstance(call.func, ast.Name)]
    (options,) = calls_of(run, "setProtocolOptions")
    assert "perMessageCompressionAccept" not in {keyword.arg for keyword in options.keywords}
    # Each websocket's protocol comes from that factory (and so is the bounded one).
    http = daphne_source("http_protocol")
    built = calls_of(http, "buildProtocol")
    assert any(
        isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Attribute)
        and call.func.value.attr == "ws_factory"
        for call in built
    )
    assert issubclass(WebSocketFactory, WebSocketServerFactory)
    assert WebSocketFactory.protocol is WebSocketProtocol
    assert issubclass(WebSocketProtocol, WebSocketServerProtocol)


class StandInReactor:
    def callLater(self, *args: Any) -> None:
        pass

    def seconds(self) -> float:
        return time.time()


def test_the_patched_factory_builds_bounded_protocols_and_accepts_deflate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(daphne.server, "WebSocketFactory", WebSocketFactory)
    daphne_websockets.enable()
    patched = daphne.server.WebSocketFactory
    daphne_websockets.enable()  # a second call changes nothing
    assert daphne.server.WebSocketFactory is patched
    assert patched.__bases__ == (WebSocketFactory,)
    factory = patched(object(), server="Daphne", reactor=StandInReactor())
    factory.setProtocolOptions(autoPingTimeout=20, allowNullOrigin=True)  # as Server.run does
    assert factory.perMessageCompressionAccept is daphne_websockets._accept
    protocol = factory.buildProtocol(("127.0.0.1", 50000))
    assert isinstance(protocol, WebSocketProtocol)
    assert protocol.factory is factory
    assert protocol.too_slow is False
    # Every send goes through the method the bound overrides.
    assert type(protocol).serverSend is not WebSocketProtocol.serverSend


def test_daphne_sends_every_message_through_server_send() -> None:
    reply = source_tree(WebSocketProtocol.handle_reply)
    assert len(calls_of(reply, "serverSend")) == 2  # bytes and text
    assert calls_of(reply, "sendMessage") == []
    parameters = inspect.signature(WebSocketProtocol.serverSend).parameters
    assert list(parameters) == ["self", "content", "binary"]
    assert parameters["binary"].default is False
    connect = source_tree(WebSocketProtocol.onConnect)
    assert "client_addr" in self_attributes(connect)  # what the bound's warning names


def test_autobahn_closes_with_our_code_and_calls_our_acceptor() -> None:
    protocol = WebSocketProtocol()
    protocol.state = protocol.STATE_CLOSED  # validated first, then ignored when closed
    protocol.sendClose(code=daphne_websockets.CLOSE_TOO_SLOW, reason="too slow: reconnect")
    with pytest.raises(Exception, match="invalid close code"):
        protocol.sendClose(code=2000)
    assert (
        "perMessageCompressionAccept"
        in inspect.signature(WebSocketServerFactory.setProtocolOptions).parameters
    )
    handshake = source_tree(WebSocketServerProtocol.succeedHandshake)
    assert calls_of(handshake, "perMessageCompressionAccept")
    assert calls_of(handshake, "create_from_offer_accept")


@pytest.mark.parametrize(
    ("params", "client_window"),
    [({"client_max_window_bits": [True]}, daphne_websockets.RECEIVE_WINDOW_BITS), ({}, 15)],
    ids=["browser offers a window size", "no window size offered"],
)
def test_our_deflate_accept_sets_the_window_memory_and_cap(
    params: dict[str, list[Any]], client_window: int
) -> None:
    offer = PerMessageDeflateOffer.parse(params)
    accept = daphne_websockets._accept([offer])
    assert isinstance(accept, PerMessageDeflateOfferAccept)
    assert daphne_websockets._accept([]) is None
    deflate = PerMessageDeflate.create_from_offer_accept(True, accept)
    assert deflate.server_max_window_bits == daphne_websockets.SEND_WINDOW_BITS
    assert deflate.client_max_window_bits == client_window
    assert deflate.mem_level == daphne_websockets.MEM_LEVEL
    assert deflate.max_message_size == daphne_websockets.MAX_CLIENT_MESSAGE


def test_an_inflated_client_message_past_the_cap_is_refused() -> None:
    offer = PerMessageDeflateOffer.parse({"client_max_window_bits": [True]})
    deflate = PerMessageDeflate.create_from_offer_accept(True, daphne_websockets._accept([offer]))
    compressor = zlib.compressobj(wbits=-daphne_websockets.RECEIVE_WINDOW_BITS)
    small = compressor.compress(b"{}") + compressor.flush(zlib.Z_SYNC_FLUSH)
    deflate.start_decompress_message()
    assert deflate.decompress_message_data(small) == b"{}"
    compressor = zlib.compressobj(wbits=-daphne_websockets.RECEIVE_WINDOW_BITS)
    bomb = compressor.compress(b"0" * (daphne_websockets.MAX_CLIENT_MESSAGE + 1))
    bomb += compressor.flush(zlib.Z_SYNC_FLUSH)
    deflate.start_decompress_message()
    with pytest.raises(PayloadExceededError):
        deflate.decompress_message_data(bomb)


class StandInFDReactor:
    def addWriter(self, writer: Any) -> None:
        pass

    def removeWriter(self, writer: Any) -> None:
        pass


class Transport(FileDescriptor):
    """Twisted's own write buffering, over a socket that takes `budget` bytes a write."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(reactor=StandInFDReactor())
        self.sock = sock
        self.connected = 1
        self.budget = 0

    def getHandle(self) -> socket.socket:
        return self.sock

    def writeSomeData(self, data: bytes) -> int:
        return min(len(data), self.budget)


@pytest.fixture
def sock() -> Iterator[socket.socket]:
    left, right = socket.socketpair()
    with left, right:
        yield left


def test_twisteds_write_buffer_is_what_the_bound_counts(sock: socket.socket) -> None:
    """`buffered_bytes` reads `dataBuffer`, `offset` and `_tempDataLen`: what was written and
    not yet handed to the kernel, however Twisted splits it between them."""
    transport = Transport(sock)
    transport.write(b"x" * 100)
    assert daphne_websockets.buffered_bytes(transport) == 100
    transport.budget = 30
    transport.doWrite()
    assert transport.offset == 30
    assert daphne_websockets.buffered_bytes(transport) == 70
    transport.write(b"y" * 5)
    assert daphne_websockets.buffered_bytes(transport) == 75
    # A real TCP connection is such a descriptor, with a socket and an abort.
    assert issubclass(tcp.Connection, FileDescriptor)
    assert callable(tcp.Connection.getHandle)
    assert callable(tcp.Connection.abortConnection)


# --- channel_layer --------------------------------------------------------------------------------


def test_the_in_memory_layer_has_the_state_ours_touches() -> None:
    layer = InMemoryChannelLayer()
    assert layer.channels == {}
    assert layer.groups == {}
    assert layer.expiry == 60
    assert layer.get_capacity("any") == 100
    layer.require_valid_group_name("group")
    layer._clean_expired()  # takes no arguments
    # Ours overrides `group_send` with the same call.
    parameters = inspect.signature(InMemoryChannelLayer.group_send).parameters
    assert list(parameters) == ["self", "group", "message"]


def test_the_expiry_scan_runs_where_ours_throttles_it() -> None:
    """The base layer scans every queue on each `receive` and `group_send`: ours overrides
    `_clean_expired` (throttled) and `group_send`, and leaves `receive` to call the former."""
    for method in (InMemoryChannelLayer.receive, InMemoryChannelLayer.group_send):
        assert calls_of(source_tree(method), "_clean_expired")
    assert "receive" not in vars(LocalChannelLayer)


async def test_a_queued_message_is_its_expiry_and_a_copy() -> None:
    """What ours puts on a queue is what the base layer's `send` does, and what its `receive`
    and `_clean_expired` read: `(expires, message)` in an `asyncio.Queue` of the capacity."""
    layer = InMemoryChannelLayer()
    message = {"type": "chat.delta", "nested": {"n": 1}}
    await layer.send("specific.abc!def", message)
    queue = layer.channels["specific.abc!def"]
    assert type(queue) is asyncio.Queue
    assert queue.maxsize == layer.get_capacity("specific.abc!def")
    expires, copy = queue.get_nowait()
    assert abs(expires - (time.time() + layer.expiry)) < 5
    assert copy == message
    assert copy["nested"] is not message["nested"]
    await layer.group_add("group", "specific.abc!def")
    assert set(layer.groups) == {"group"}
    assert set(layer.groups["group"]) == {"specific.abc!def"}


@pytest.mark.parametrize("layer_class", [InMemoryChannelLayer, LocalChannelLayer])
async def test_a_group_send_reaches_each_member_once_and_drops_on_a_full_queue(
    layer_class: type[Any],
) -> None:
    """The semantics ours keeps: every member gets its own copy; a full queue drops the message
    for that member, without an error."""
    layer = layer_class(capacity=1)
    for channel in ("specific.a!1", "specific.a!2"):
        await layer.group_add("group", channel)
    first = {"type": "chat.delta", "parts": ["one"]}
    await layer.group_send("group", first)
    await layer.group_send("group", {"type": "chat.delta", "parts": ["two"]})
    one = await layer.receive("specific.a!1")
    two = await layer.receive("specific.a!2")
    assert one == two == first
    one["parts"].append("changed")
    assert two["parts"] == ["one"]
    assert layer.channels == {}  # each queue held one message, and is gone once read


async def test_the_base_scan_expires_what_ours_queued() -> None:
    layer = LocalChannelLayer(expiry=-1)  # every message is past its expiry once queued
    await layer.group_add("group", "specific.a!1")
    await layer.group_send("group", {"type": "chat.delta"})
    assert "specific.a!1" in layer.channels
    layer._cleaned_at = 0.0
    layer._clean_expired()
    assert layer.channels == {}
    assert layer.groups["group"] == {}  # an expired message takes its channel out of groups


async def test_the_user_auser_loads_is_the_request_users_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An async view's `login_required` awaits `auser()`; its thread then reads `request.user`,
    which Django caches apart (`_cached_user`): without our `Authentication` it loaded the user a
    second time."""
    from django.contrib.auth import middleware as auth_middleware

    user = object()

    async def aget_user(request: HttpRequest) -> object:
        return user

    def get_user(request: HttpRequest) -> object:
        raise AssertionError("the user was loaded a second time")

    monkeypatch.setattr(auth_middleware.auth, "aget_user", aget_user)
    monkeypatch.setattr(auth_middleware.auth, "get_user", get_user)
    request = RequestFactory().get("/")
    request.session = Tripwire(KEY)
    inline_middleware.Authentication(a_view).process_request(request)
    assert await request.auser() is user
    assert request.user == user  # the lazy object resolved to the one loaded


# --- WhiteNoise (`chatapp/static_files.py`) ------------------------------------------------------
# `StaticFiles` answers from WhiteNoise's index without its WSGI app: it reads `files` and
# `find_file`, overrides the two cache hooks, and calls a file's `get_response` with the WSGI
# names of the headers it reads; `StaticStorage` narrows `compress_files`.


@pytest.fixture
def static_root(tmp_path: Path) -> Path:
    (tmp_path / "app.0123456789ab.js").write_bytes(b"hashed" * 100)
    (tmp_path / "app.0123456789ab.js.br").write_bytes(b"br")
    (tmp_path / "app.0123456789ab.js.gz").write_bytes(b"gzip")
    (tmp_path / "plain.js").write_bytes(b"plain")
    return tmp_path


def test_whitenoise_indexes_files_by_url_and_calls_our_cache_hooks(static_root: Path) -> None:
    from chatapp.static_files import IMMUTABLE, _Index

    index = _Index(static_root, "/static/", {"app.0123456789ab.js"})
    assert set(index.files) >= {"/static/app.0123456789ab.js", "/static/plain.js"}
    hashed = dict(index.find("/static/app.0123456789ab.js").get_response("GET", {}).headers)
    assert hashed["Cache-Control"] == IMMUTABLE, "our immutable_file_test and add_cache_headers"
    assert hashed["X-Content-Type-Options"] == "nosniff"
    plain = dict(index.find("/static/plain.js").get_response("GET", {}).headers)
    assert plain["Cache-Control"] == "max-age=60, public"  # WhiteNoise's own, for the rest
    assert plain["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize(
    ("request_headers", "status", "encoding", "body"),
    [
        ({"HTTP_ACCEPT_ENCODING": "gzip, br"}, 200, "br", b"br"),
        ({"HTTP_ACCEPT_ENCODING": "gzip"}, 200, "gzip", b"gzip"),
        ({}, 200, None, b"hashed" * 100),
        ({"HTTP_RANGE": "bytes=0-5"}, 206, None, b"hashed"),
    ],
)
def test_a_whitenoise_file_answers_the_wsgi_headers_we_pass(
    static_root: Path,
    request_headers: dict[str, str],
    status: int,
    encoding: str | None,
    body: bytes,
) -> None:
    from chatapp.static_files import _READ, _Index

    assert set(request_headers) <= set(_READ.values())
    index = _Index(static_root, "/static/", set())
    response = index.find("/static/app.0123456789ab.js").get_response("GET", request_headers)
    assert int(response.status) == status
    headers = dict(response.headers)
    assert headers.get("Content-Encoding") == encoding
    assert headers["Vary"] == "Accept-Encoding"
    with response.file as file:
        assert file.read() == body
    etag = headers["ETag"]
    again = index.find("/static/app.0123456789ab.js").get_response(
        "GET", {"HTTP_IF_NONE_MATCH": etag}
    )
    assert (int(again.status), again.file) == (304, None)


def test_whitenoise_autorefresh_finds_only_canonical_paths_inside_its_roots(
    static_root: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """DEBUG's `_Sources` calls `find_file` per request: WhiteNoise's own path checks are what
    keep a request's path inside the finders' directories."""
    from whitenoise.base import WhiteNoise

    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.txt").write_bytes(b"secret")
    sources = WhiteNoise(application=None, autorefresh=True, max_age=0)
    sources.add_files(str(static_root), prefix="/static/")
    assert sources.find_file("/static/plain.js") is not None
    assert sources.find_file(f"/static/../{outside.name}/secret.txt") is None
    assert sources.find_file("/static//plain.js") is None


def test_whitenoise_compresses_through_compress_files_once_every_name_is_hashed() -> None:
    """`StaticStorage.compress_files` keeps the hashed names it reads from `hashed_files`: they
    must all be known when WhiteNoise calls it, after the loop over Django's processed files."""
    from whitenoise.storage import CompressedManifestStaticFilesStorage

    tree = source_tree(CompressedManifestStaticFilesStorage.post_process_with_compression)
    (call,) = calls_of(tree, "compress_files")
    loops = [node for node in ast.walk(tree) if isinstance(node, ast.For)]
    over_files = [loop for loop in loops if ast.unparse(loop.iter) == "files"]
    assert over_files, "WhiteNoise no longer loops over the processed files"
    assert all(loop.end_lineno is not None and loop.end_lineno < call.lineno for loop in over_files)
