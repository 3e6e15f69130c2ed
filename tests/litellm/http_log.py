"""HTTP/1.1 exchanges read back from the bytes a TCP proxy forwarded: each request with the reply
to it (keep-alive connections carry several, one after another), the reply's body de-chunked,
and when its last byte went out."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

__all__ = ["Exchange", "exchanges"]


@dataclass(frozen=True, slots=True)
class Exchange:
    method: str
    path: str
    request_body: bytes
    status: int
    headers: dict[str, str]
    """Lower-cased names; a repeated header keeps its last value."""
    body: bytes
    ended_at: float
    """When the reply's last byte was forwarded (`time.time()`)."""

    def request_json(self) -> Any:
        return json.loads(self.request_body) if self.request_body else None

    def sse_data(self) -> list[Any]:
        """The JSON of every `data:` line of an event-stream body, `[DONE]` left out, its numbers
        with a fraction read as exact decimals (as they were written)."""
        found = []
        for line in self.body.replace(b"\r\n", b"\n").split(b"\n"):
            if line.startswith(b"data:") and line[5:].strip() not in (b"", b"[DONE]"):
                found.append(json.loads(line[5:], parse_float=Decimal))
        return found


def _head(data: bytes, at: int) -> tuple[str, dict[str, str], int] | None:
    end = data.find(b"\r\n\r\n", at)
    if end < 0:
        return None
    first, *lines = data[at:end].decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return first, headers, end + 4


def _body(data: bytes, at: int, headers: dict[str, str]) -> tuple[bytes, int] | None:
    """The body at `at` and the offset after it; None while it has not all arrived."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = bytearray()
        while True:
            line_end = data.find(b"\r\n", at)
            if line_end < 0:
                return None
            size = int(data[at:line_end].split(b";")[0], 16)
            start = line_end + 2
            if len(data) < start + size + 2:
                return None
            body += data[start : start + size]
            at = start + size + 2
            if size == 0:
                return bytes(body), at
    length = int(headers.get("content-length", "0"))
    if len(data) < at + length:
        return None
    return data[at : at + length], at + length


def exchanges(request: bytes, reply: list[tuple[float, bytes]]) -> list[Exchange]:
    """The complete exchanges of one connection: the requests it carried and the replies, given
    as (time sent, bytes) pieces."""
    data = b"".join(piece for _, piece in reply)
    ends, total = [], 0
    for sent_at, piece in reply:
        total += len(piece)
        ends.append((total, sent_at))
    found: list[Exchange] = []
    req_at = rep_at = 0
    while (req := _head(request, req_at)) and (rep := _head(data, rep_at)):
        (request_line, req_headers, req_at), (status_line, headers, rep_at) = req, rep
        req_body = _body(request, req_at, req_headers)
        rep_body = _body(data, rep_at, headers)
        if req_body is None or rep_body is None:
            break
        (request_body, req_at), (body, rep_at) = req_body, rep_body
        method, path, _ = request_line.split(" ", 2)
        ended_at = next(sent_at for offset, sent_at in ends if offset >= rep_at)
        status = int(status_line.split(" ", 2)[1])
        found.append(Exchange(method, path, request_body, status, headers, body, ended_at))
    return found
