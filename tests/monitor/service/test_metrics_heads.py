"""Broken request heads on the /metrics listener, sent over raw sockets to a real server: each is answered 400 or 431
with a short text/plain body (this listener speaks text, not OTLP), the connection closed, no traceback logged, and
/metrics still scrapes."""

from __future__ import annotations

import logging
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from monitor.serve import Server
from tests.monitor.service.conftest import RULES, ServeFactory, scrape, value, wait_for
from tests.monitor.service.http_util import post
from tests.monitor.service.test_bad_input import PB, good_pb
from tests.monitor.service.test_http_framing import _closed, _read_response
from tests.monitor.service.test_http_heads import BAD_HEADS as RECEIVER_HEADS

TOOLWATCH = str(Path(sys.executable).parent / "toolwatch")
_START = b"GET /metrics HTTP/1.1\r\nHost: x\r\n"

BAD_HEADS = {
    "bad request line": (b"GET /metrics HTTX/1.1\r\nHost: x\r\n\r\n", 400),
    "bad method": (b"G@T /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    "TLS on the plain port": (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(32) + b"\r\n\r\n", 400),
    "invalid header name byte": (_START + b"X-Bad\x01: v\r\n\r\n", 400),
    "invalid header value byte": (_START + b"X-Bad: a\x00b\r\n\r\n", 400),
    "no Host in HTTP/1.1": (b"GET /healthz HTTP/1.1\r\n\r\n", 400),
    "header too long": (_START + b"X-Long: " + b"a" * 8191 + b"\r\n\r\n", 431),
    "target too long": (b"GET /metrics?" + b"a" * 8190 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 431),
    "too many headers": (_START + b"".join(b"X-%d: v\r\n" % i for i in range(128)) + b"\r\n", 431),
    "Content-Length not a number": (_START + b"Content-Length: abc\r\n\r\n", 400),
    "two Content-Lengths": (_START + b"Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400),
}


def _send(port: int, data: bytes) -> tuple[int, bytes, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        status, head, body = _read_response(sock)
        assert _closed(sock)
    return status, head, body


def _still_scrapes(server: Server) -> None:
    assert value(scrape(server), "toolwatch_turns_evicted_total") is not None
    with urllib.request.urlopen(server.metrics_url.replace("/metrics", "/healthz"), timeout=10) as resp:
        assert resp.status == 200 and resp.read() == b"ok\n"


@pytest.mark.parametrize(("data", "code"), list(BAD_HEADS.values()), ids=list(BAD_HEADS))
def test_a_broken_head_on_the_metrics_listener_is_answered_in_text_without_a_traceback(
    serve: ServeFactory, data: bytes, code: int, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: aiohttp's own "400 Bad Request" page (no 431, the parser's message whole) and "Error handling request"
    # with a traceback at ERROR level, for every such request.
    _, server = serve()
    with caplog.at_level(logging.DEBUG):
        status, head, body = _send(server.metrics_port, data)
    assert status == code, (head, body)
    fields = head.lower()
    assert b"\r\ncontent-type: text/plain" in fields, head
    assert b"\r\nconnection: close" in fields, head
    text = body.decode()
    want = "request head too large" if code == 431 else "bad request head"
    assert text.startswith(f"{code} {want}: ") and text.endswith("\n") and text.count("\n") == 1, text
    assert len(body) <= 300  # the client's own bytes are not echoed whole
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR], "a client's bad head"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "bad request head on the metrics listener" in warnings[0].getMessage(), warnings[0].getMessage()
    _still_scrapes(server)


def test_a_storm_of_broken_heads_on_the_metrics_listener_is_logged_once(
    serve: ServeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    _, server = serve()
    data, _ = BAD_HEADS["invalid header name byte"]
    with caplog.at_level(logging.DEBUG):
        for _ in range(20):
            assert _send(server.metrics_port, data)[0] == 400
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert not [r for r in caplog.records if r.exc_info]
    _still_scrapes(server)


def test_the_two_listeners_hush_their_broken_heads_apart(serve: ServeFactory, caplog: pytest.LogCaptureFixture) -> None:
    # A scanner on one port does not hide the other's first bad head.
    _, server = serve()
    data, _ = BAD_HEADS["bad request line"]
    with caplog.at_level(logging.DEBUG):
        for _ in range(3):
            assert _send(server.metrics_port, data)[0] == 400
            assert _send(server.port, data)[0] == 400
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 2 and sum("metrics listener" in line for line in lines) == 1, lines


def test_a_broken_head_after_a_scrape_on_one_connection_answers_the_scrape_first(serve: ServeFactory) -> None:
    _, server = serve()
    bad, _ = BAD_HEADS["Content-Length not a number"]
    with socket.create_connection(("127.0.0.1", server.metrics_port), timeout=10) as sock:
        sock.sendall(_START + b"\r\n")
        status, _, page = _read_response(sock)
        assert status == 200 and b"toolwatch_turns_evicted_total" in page
        sock.sendall(bad)
        status, head, answer = _read_response(sock)
        assert status == 400 and b"text/plain" in head.lower() and answer.startswith(b"400 bad request head: ")
        assert _closed(sock)
    _still_scrapes(server)


def test_toolwatch_serve_logs_broken_heads_of_each_listener_as_one_line_without_a_traceback(tmp_path: Path) -> None:
    # The command as run: its own logging set-up, its stderr read whole after it stopped. Both listeners get every
    # broken head; each logs one line for them all.
    err = tmp_path / "stderr.txt"
    args = ["serve", "--rules", str(RULES), "--port", "0", "--metrics-port", "0", "--no-watch"]
    with err.open("w") as out:
        proc = subprocess.Popen([TOOLWATCH, *args], stderr=out, text=True)
    try:
        wait_for(lambda: ", metrics on " in err.read_text() or proc.poll() is not None, timeout=120)
        started = err.read_text()
        url = started.split(", metrics on ")[1].split()[0].strip()
        endpoint = started.split("OTLP/HTTP on ")[1].split(",")[0].strip()
        for port, heads in ((_port(url), BAD_HEADS), (_port(endpoint), RECEIVER_HEADS)):
            for data, code in heads.values():
                assert _send(port, data)[0] == code
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert resp.status == 200 and b"toolwatch_requests_total" in resp.read()
        status, body, _ = post(endpoint, good_pb(), PB)
        assert status == 200 and ExportTraceServiceResponse.FromString(body).partial_success.rejected_spans == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    text = err.read_text()
    assert proc.returncode == 0, text
    assert "Traceback" not in text and "Error handling request" not in text and " ERROR " not in text, text
    assert text.count("bad request head") == 2 and text.count("bad request head on the metrics listener") == 1, text


def _port(url: str) -> int:
    return int(url.split(":")[2].split("/")[0])

