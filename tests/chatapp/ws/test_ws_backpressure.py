"""The bound on a silent websocket's backlog, on a stand-in for Daphne's protocol and transport
(the real ones are driven in tests/faults/test_slow_client.py)."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from autobahn.exception import Disconnected

from chatapp.patches import daphne_websockets


class Transport:
    """The attributes of a Twisted TCP transport the bound reads."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.dataBuffer = b""
        self.offset = 0
        self._tempDataLen = 0
        self.connected = True
        self.aborted = False

    def getHandle(self) -> socket.socket:
        return self.sock

    def abortConnection(self) -> None:
        self.aborted = True
        self.connected = False


class Protocol:
    """Daphne's `WebSocketProtocol`, as far as the bound uses it."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.client_addr = ["127.0.0.1", 50000]
        self.sent: list[bytes | str] = []
        self.closed: int | None = None

    def serverSend(self, content: bytes | str, binary: bool = False) -> None:
        if self.closed is not None:  # as autobahn's `sendMessage` on a closed protocol
            raise Disconnected("Attempt to send on a closed protocol")
        self.sent.append(content)
        self.transport._tempDataLen += len(content)

    def sendClose(self, code: int | None = None, reason: str | None = None) -> None:
        self.closed = code


@pytest.fixture
def transport() -> Iterator[Transport]:
    left, right = socket.socketpair()
    with left, right:
        yield Transport(left)


@pytest.fixture
def later(monkeypatch: pytest.MonkeyPatch) -> list[tuple[float, Callable[[], None]]]:
    calls: list[tuple[float, Callable[[], None]]] = []
    monkeypatch.setattr(daphne_websockets, "call_later", lambda delay, f: calls.append((delay, f)))
    return calls


def bounded(transport: Transport) -> Any:
    return daphne_websockets._bounded(Protocol)(transport)


def test_the_backlog_counts_what_twisted_holds(transport: Transport) -> None:
    transport.dataBuffer = b"x" * 100
    transport.offset = 40
    transport._tempDataLen = 5
    assert daphne_websockets.buffered_bytes(transport) == 65


def test_a_transport_of_another_kind_has_no_bound() -> None:
    assert daphne_websockets.buffered_bytes(object()) == 0


def test_a_socket_over_the_bound_is_closed_and_sent_nothing_more(
    settings: Any, transport: Transport, later: list[tuple[float, Callable[[], None]]]
) -> None:
    settings.CHAT_WS_MAX_BUFFERED = 10
    protocol = bounded(transport)
    protocol.serverSend("0123456789")
    protocol.serverSend("more")  # the backlog is at the bound, not over it: sent
    protocol.serverSend("and more")  # over it: the socket is closed instead
    protocol.serverSend("and yet more")
    assert protocol.sent == ["0123456789", "more"]
    assert protocol.closed == daphne_websockets.CLOSE_TOO_SLOW
    ((delay, drop),) = later
    assert delay == daphne_websockets.GRACE
    drop()
    assert transport.aborted


def test_a_socket_that_read_its_close_frame_is_not_aborted(
    settings: Any, transport: Transport, later: list[tuple[float, Callable[[], None]]]
) -> None:
    settings.CHAT_WS_MAX_BUFFERED = 1
    protocol = bounded(transport)
    protocol.serverSend("ab")
    protocol.serverSend("c")
    transport.connected = False  # the client closed in time
    later[0][1]()
    assert not transport.aborted


def test_zero_turns_the_bound_off(settings: Any, transport: Transport) -> None:
    settings.CHAT_WS_MAX_BUFFERED = 0
    protocol = bounded(transport)
    for _ in range(3):
        protocol.serverSend("x" * 1000)
    assert len(protocol.sent) == 3
    assert protocol.closed is None


class FlushedProtocol(Protocol):
    """Twisted has handed everything to the kernel by the next send, as it does between ticks."""

    def serverSend(self, content: bytes | str, binary: bool = False) -> None:
        if self.closed is not None:  # as autobahn's `sendMessage` on a closed protocol
            raise Disconnected("Attempt to send on a closed protocol")
        self.sent.append(content)


def test_the_kernel_is_asked_only_when_the_bound_could_be_passed(
    settings: Any,
    transport: Transport,
    monkeypatch: pytest.MonkeyPatch,
    later: list[tuple[float, Callable[[], None]]],
) -> None:
    """A silent client is closed at the same send as when the kernel was asked every time; a
    reading one costs a system call per `CHAT_WS_MAX_BUFFERED` bytes or so, not one per frame."""
    settings.CHAT_WS_MAX_BUFFERED = 100
    asked: list[int] = []
    kernel = {"queued": 0}

    def queued(_: Any) -> int:
        asked.append(kernel["queued"])
        return kernel["queued"]

    monkeypatch.setattr(daphne_websockets, "kernel_queued", queued)
    silent = daphne_websockets._bounded(FlushedProtocol)(transport)
    for _ in range(20):
        silent.serverSend("x" * 10)
        kernel["queued"] += 10 if silent.closed is None else 0
    assert len(silent.sent) == 11  # 110 bytes queued: over the bound, found at the next send
    assert silent.closed == daphne_websockets.CLOSE_TOO_SLOW
    assert asked == [110]

    asked.clear()
    kernel["queued"] = 0  # a client that reads everything at once
    reading = daphne_websockets._bounded(FlushedProtocol)(transport)
    for _ in range(100):
        reading.serverSend("x" * 10)
    assert len(reading.sent) == 100
    assert reading.closed is None
    assert 0 < len(asked) <= 10


def test_a_message_for_a_socket_closed_meanwhile_is_dropped_without_an_error(
    transport: Transport, caplog: pytest.LogCaptureFixture
) -> None:
    """A tab that went away while a delta was on its way is not an error: the send returns (it
    raised `Disconnected` into the consumer, and Daphne logged a traceback per message)."""
    protocol = bounded(transport)
    protocol.serverSend("before")
    protocol.sendClose(code=1001)  # the browser left
    protocol.serverSend("after")
    assert protocol.sent == ["before"]
    assert not [record for record in caplog.records if record.levelname in ("WARNING", "ERROR")]
