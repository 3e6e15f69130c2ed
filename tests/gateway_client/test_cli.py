"""`python -m gateway_client replay`: clear errors for what is not a capture, bare bodies."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gateway_client.capture import parse_capture


def replay(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway_client", "replay", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_missing_file(tmp_path: Path) -> None:
    result = replay(str(tmp_path / "nope.http"))
    assert result.returncode == 2
    assert "no such file" in result.stderr
    assert "Traceback" not in result.stderr


def test_directory_and_empty_file(tmp_path: Path) -> None:
    assert "is a directory" in replay(str(tmp_path)).stderr
    empty = tmp_path / "empty.http"
    empty.write_bytes(b"")
    result = replay(str(empty))
    assert result.returncode == 2
    assert "empty" in result.stderr


def test_not_a_capture(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("just some notes\n")
    result = replay(str(notes))
    assert result.returncode == 2
    assert "not a capture" in result.stderr


def test_bad_status_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.http"
    bad.write_bytes(b"HTTP/1.1 OK\r\n\r\n")
    assert "bad status line" in replay(str(bad)).stderr


def test_bad_chunk_size(tmp_path: Path) -> None:
    body = tmp_path / "body.sse"
    body.write_bytes(b"data: [DONE]\n\n")
    assert replay(str(body), "--chunk-size", "0").returncode == 2


def test_bare_body_is_a_200_event_stream(tmp_path: Path) -> None:
    body = tmp_path / "body.sse"
    body.write_bytes(
        b': hi\n\ndata: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\ndata: [DONE]\n\n'
    )
    result = replay(str(body), "--chunk-size", "3")
    assert result.returncode == 0
    output = json.loads(result.stdout)
    assert (output["status"], output["outcome"], output["content"]) == (200, "complete", "x")


def test_curl_keeps_every_header_block() -> None:
    raw = (
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Generation-Id: g\r\n\r\n"
        b"data: [DONE]\n\n"
    )
    capture = parse_capture(raw)
    assert capture.status == 200
    assert capture.headers["x-generation-id"] == "g"
    assert capture.body == b"data: [DONE]\n\n"


def test_proxy_html_error_page(tmp_path: Path) -> None:
    page = tmp_path / "proxy.http"
    page.write_bytes(
        b"HTTP/1.1 504 Gateway Time-out\r\nContent-Type: text/html\r\n\r\n"
        b"<html><body><h1>504 Gateway Time-out</h1></body></html>"
    )
    output = json.loads(replay(str(page)).stdout)
    assert output["outcome"] == "error"
    assert output["error"]["status"] == 504
    assert "504 Gateway Time-out" in output["error"]["message"]
