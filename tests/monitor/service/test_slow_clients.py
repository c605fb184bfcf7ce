"""Clients that stall, vanish or pile up connections hold nothing of the server's for long, and block no one else."""

from __future__ import annotations

import gc
import gzip
import json
import logging
import socket
import time

import pytest
from google.rpc import code_pb2, status_pb2  # type: ignore[import-untyped]

from tests.monitor.service.conftest import ServeFactory, scrape, value, wait_for
from tests.monitor.service.http_util import post
from tests.monitor.service.test_bad_input import JS, PB, assert_still_serving, good_pb
from tests.monitor.service.test_http_framing import _read_response

# The status codes OTLP/HTTP exporters retry (the OTLP specification; the Collector's and the Python SDK's too): an
# answer with another one loses the export's spans.
OTLP_RETRYABLE = (429, 502, 503, 504)


def _head(length: int, gzipped: bool = False, ctype: str = PB) -> bytes:
    enc = "Content-Encoding: gzip\r\n" if gzipped else ""
    return (
        f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: {ctype}\r\n{enc}Content-Length: {length}\r\n\r\n"
    ).encode()


def _rpc_status(ctype: str, body: bytes) -> tuple[int, str]:
    if ctype == JS:
        st = json.loads(body)
        return int(st["code"]), str(st["message"])
    st = status_pb2.Status.FromString(body)
    return int(st.code), str(st.message)


def _bodies_held() -> int:
    """Lists of body parts (over 1 MiB of bytes) that the collector can find: held, or cyclic garbage."""
    n = 0
    for obj in gc.get_objects():
        if isinstance(obj, list) and len(obj) < 100_000:
            held = sum(len(x) for x in obj if isinstance(x, bytes))
            if held > 1 << 20:
                n += 1
    return n


def _read_all(sock: socket.socket, timeout: float) -> bytes:
    sock.settimeout(timeout)
    out = b""
    try:
        while data := sock.recv(65536):
            out += data
    except (TimeoutError, ConnectionResetError):
        pass
    return out


def _read_head(sock: socket.socket, timeout: float = 10) -> bytes:
    """What arrives until the end of a response head (or the connection's end): no fixed wait on a busy machine."""
    sock.settimeout(timeout)
    out = b""
    while b"\r\n\r\n" not in out and (data := sock.recv(65536)):
        out += data
    return out


def test_a_client_gone_mid_body_leaves_no_garbage_holding_its_body(
    serve: ServeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    # The body reader keeps the "connection lost" error; a traceback through the handler's frames made a cycle that
    # held the part of the body read so far (up to --max-decompressed-bytes) until a full collection, which the
    # tuned GC of `toolwatch serve` almost never runs: 256 MiB more resident memory per 4 vanished gzip clients.
    limit = 8 << 20
    _, server = serve(max_decompressed_bytes=limit)
    body = gzip.compress(b"\0" * (limit - 1024), 9)
    gc.collect()
    gc.disable()
    try:
        with caplog.at_level(logging.ERROR, logger="aiohttp.server"):
            for _ in range(2):
                sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
                sock.sendall(_head(len(body) + 10, gzipped=True) + body)  # the last 10 bytes never come
                wait_for(lambda: _bodies_held() == 1)  # the server holds the decompressed part
                sock.close()
                time.sleep(0.3)
                wait_for(lambda: _bodies_held() == 0, timeout=5)
    finally:
        gc.enable()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "a vanished client is not a server error"
    assert_still_serving(server)


def test_a_stalled_body_gets_504_and_frees_its_share_of_the_bodies_in_flight(serve: ServeFactory) -> None:
    # Four clients that send most of a body and then nothing used to hold the shared in-flight bound for as long as
    # they kept the connection: every other exporter got 503 meanwhile (forever, for a client that never closes).
    limit = 256 << 10
    _, server = serve(max_body_bytes=limit, max_decompressed_bytes=limit, read_timeout_s=1.0)
    stalled = []
    t0 = time.monotonic()
    for _ in range(4):
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        sock.sendall(_head(limit) + b"\0" * (limit - 100))
        stalled.append(sock)
    try:
        wait_for(lambda: post(server.endpoint, good_pb(), PB)[0] == 503, timeout=5)
        answers = [_read_all(sock, 5) for sock in stalled]
    finally:
        for sock in stalled:
            sock.close()
    assert all(a.startswith(b"HTTP/1.1 504 ") for a in answers), answers
    assert time.monotonic() - t0 < 5
    assert_still_serving(server)
    assert value(scrape(server), "toolwatch_requests_total", transport="http_protobuf", code="504") == 4


@pytest.mark.parametrize("ctype", [PB, JS])
def test_a_stalled_body_is_told_to_retry_in_its_own_content_type(serve: ServeFactory, ctype: str) -> None:
    # Before: 408, which OTLP exporters do not retry (the export's spans were lost), for a body held up on the way.
    _, server = serve(read_timeout_s=0.5)
    body = good_pb() if ctype == PB else b'{"resourceSpans": []}'
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(_head(len(body), ctype=ctype) + body[: len(body) // 2])
        status, head, answer = _read_response(sock)
        assert _read_all(sock, 5) == b""  # closed: the rest of the body cannot be told from a next request
    assert status in OTLP_RETRYABLE, head
    assert f"\r\nContent-Type: {ctype}\r\n".encode() in head, head
    code, message = _rpc_status(ctype, answer)
    assert code == code_pb2.DEADLINE_EXCEEDED and "not received within 0.5 s" in message, message
    assert value(scrape(server), "toolwatch_requests_total", transport=f"http_{'json' if ctype == JS else 'protobuf'}",
                 code=str(status)) == 1
    assert_still_serving(server)


@pytest.mark.parametrize("sent", [b"", b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n"], ids=["idle", "half-a-head"])
def test_a_connection_without_a_whole_request_is_closed_after_the_read_timeout(
    serve: ServeFactory, sent: bytes
) -> None:
    # aiohttp's default keeps such a connection for an hour; 20,000 of them took every file descriptor of the
    # process, and then /metrics, /healthz and every exporter timed out.
    _, server = serve(read_timeout_s=0.5)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        t0 = time.monotonic()
        sock.sendall(sent)
        assert _read_all(sock, 5) == b""  # closed by the server, not timed out here
        assert time.monotonic() - t0 < 3
    assert_still_serving(server)


def test_connections_past_the_cap_get_503_and_the_rest_are_served(serve: ServeFactory) -> None:
    _, server = serve(max_connections=8)
    held = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(8)]
    try:
        time.sleep(0.2)
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as extra:
            answer = _read_all(extra, 5)
        assert answer.startswith(b"HTTP/1.1 503 "), answer
        assert b"Retry-After: 1\r\n" in answer
        # Answered before any byte of a request is read: in OTLP/HTTP's default encoding, a google.rpc.Status.
        head, body = answer.split(b"\r\n\r\n", 1)
        assert b"\r\nContent-Type: application/x-protobuf\r\n" in head, head
        assert _rpc_status(PB, body)[0] == code_pb2.UNAVAILABLE
        for sock in held[:4]:  # the connections within the cap are served
            sock.sendall(_head(len(good_pb())) + good_pb())
            assert _read_head(sock).startswith(b"HTTP/1.1 200 ")
        status = 0
        try:
            status = post(server.endpoint, good_pb(), PB)[0]
        except OSError:
            pass
        assert status in (0, 503)  # refused (a reset may come before the answer is read)
    finally:
        for sock in held:
            sock.close()
    wait_for(lambda: post(server.endpoint, good_pb(), PB)[0] == 200)
    assert_still_serving(server)  # /metrics has its own connections
    assert (value(scrape(server), "toolwatch_connections_refused_total", listener="otlp_http") or 0) >= 1
