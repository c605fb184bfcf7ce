"""OTLP/HTTP requests at the edges of HTTP/1.1 framing, sent over raw sockets: `Expect: 100-continue`, broken chunked
bodies and clients that go away mid-body."""

from __future__ import annotations

import logging
import socket
import struct
import time

import pytest
from google.rpc import code_pb2, status_pb2  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from monitor.serve import Server
from tests.monitor.service.conftest import ServeFactory, scrape, value, wait_for
from tests.monitor.service.test_bad_input import PB, assert_still_serving, good_pb

LIMIT = 1 << 20


def _head(server: Server, *lines: str) -> bytes:
    fields = "".join(f"{line}\r\n" for line in lines)
    return f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: {PB}\r\n{fields}\r\n".encode()


def _read_response(
    sock: socket.socket, timeout: float = 10, buffer: bytearray | None = None
) -> tuple[int, bytes, bytes]:
    """One response (after any interim 1xx ones): its status, head and body; the head says Content-Length. `buffer`
    keeps what arrived past it (pipelined answers) for the next call."""
    sock.settimeout(timeout)
    data = bytes(buffer or b"")
    while True:
        while b"\r\n\r\n" not in data:
            more = sock.recv(65536)
            if not more:
                raise AssertionError(f"connection closed before a whole response head: {data!r}")
            data += more
        head, data = data.split(b"\r\n\r\n", 1)
        status = int(head.split(b" ", 2)[1])
        if status >= 200:
            break
    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    while len(data) < length:
        data += sock.recv(65536)
    if buffer is not None:
        buffer[:] = data[length:]
    return status, head, data[:length]


def _interim_or_final(sock: socket.socket, timeout: float = 10) -> bytes:
    """The first response head the server sends, interim or final."""
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        more = sock.recv(65536)
        if not more:
            break
        data += more
    return data


def _closed(sock: socket.socket, timeout: float = 5) -> bool:
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass
    return True


def _requests(server: Server, code: str) -> float:
    return value(scrape(server), "toolwatch_requests_total", code=code, transport="http_protobuf") or 0.0


# Expect: 100-continue


def test_expect_continue_with_a_body_over_the_limit_is_refused_before_it_is_sent(serve: ServeFactory) -> None:
    # Before: "100 Continue" at once, then 413 once the client had started sending its 10 MiB.
    _, server = serve(max_body_bytes=LIMIT)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(_head(server, f"Content-Length: {10 * LIMIT}", "Expect: 100-continue"))
        first = _interim_or_final(sock)
        assert first.startswith(b"HTTP/1.1 413 "), first
        head, body = first.split(b"\r\n\r\n", 1)
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        while len(body) < length:
            body += sock.recv(65536)
        status = status_pb2.Status.FromString(body[:length])
        assert status.code == code_pb2.RESOURCE_EXHAUSTED and str(LIMIT) in status.message
        assert _closed(sock)
    assert _requests(server, "413") == 1
    assert_still_serving(server)


def test_expect_continue_without_the_token_is_refused_before_the_body(serve: ServeFactory) -> None:
    _, server = serve(token="s3cret")
    body = good_pb()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(_head(server, f"Content-Length: {len(body)}", "Expect: 100-continue"))
        first = _interim_or_final(sock)
        assert first.startswith(b"HTTP/1.1 401 "), first
        assert b"WWW-Authenticate: Bearer" in first


@pytest.mark.parametrize("expect", ["100-continue", "100-Continue"])
def test_expect_continue_with_an_acceptable_body_gets_100_and_then_200(serve: ServeFactory, expect: str) -> None:
    _, server = serve(max_body_bytes=LIMIT)
    body = good_pb()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(_head(server, f"Content-Length: {len(body)}", f"Expect: {expect}"))
        assert _interim_or_final(sock) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        status, _, answer = _read_response(sock)
        assert status == 200
        assert ExportTraceServiceResponse.FromString(answer).partial_success.rejected_spans == 0
        # The connection is reused for the next request.
        sock.sendall(_head(server, f"Content-Length: {len(body)}") + body)
        assert _read_response(sock)[0] == 200
    assert _requests(server, "200") == 2


# Chunked bodies whose framing breaks


BAD_CHUNKS = {
    "invalid chunk size": b"zz\r\nabc\r\n0\r\n\r\n",
    "invalid size after a good chunk": b"3\r\nabc\r\nzz\r\n0\r\n\r\n",
    "chunk longer than its size": b"3\r\nabcXY\r\n0\r\n\r\n",
}


@pytest.mark.parametrize("same_packet", [False, True], ids=["body-later", "body-with-head"])
@pytest.mark.parametrize("chunks", list(BAD_CHUNKS.values()), ids=list(BAD_CHUNKS))
def test_a_malformed_chunk_is_400_with_a_status(
    serve: ServeFactory, chunks: bytes, same_packet: bool, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: a body arriving after its head waited for the read timeout (10 s here, then answered 408); one in the
    # head's packet got aiohttp's own text/plain 400, and a traceback logged as a server error. The answer must come
    # well before that timeout (the bound leaves a loaded machine seconds, and the old wait twice as much again).
    _, server = serve(read_timeout_s=10.0)
    head = _head(server, "Transfer-Encoding: chunked")
    with caplog.at_level(logging.ERROR), socket.create_connection(("127.0.0.1", server.port), timeout=20) as sock:
        t0 = time.monotonic()
        if same_packet:
            sock.sendall(head + chunks)
        else:
            sock.sendall(head)
            time.sleep(0.2)  # the handler is reading the body
            sock.sendall(chunks)
        status, head_out, answer = _read_response(sock, timeout=20)  # past the read timeout: an old 408 is seen
        assert time.monotonic() - t0 < 5.0
        assert status == 400, answer
        assert b"application/x-protobuf" in head_out
        rpc = status_pb2.Status.FromString(answer)
        assert rpc.code == code_pb2.INVALID_ARGUMENT and "chunked" in rpc.message
        assert _closed(sock)
    assert _requests(server, "400") == 1
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "a client's bad framing is no server error"
    assert_still_serving(server)


def _vanish(sock: socket.socket, reset: bool) -> None:
    if reset:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


@pytest.mark.parametrize("reset", [False, True], ids=["close", "reset"])
def test_a_client_gone_mid_chunk_is_counted_as_one_gone_mid_length_body(
    serve: ServeFactory, reset: bool, caplog: pytest.LogCaptureFixture
) -> None:
    _, server = serve(read_timeout_s=30.0)
    with caplog.at_level(logging.ERROR):
        for n, framing in enumerate(("Content-Length: 1000", "Transfer-Encoding: chunked"), start=1):
            sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
            sock.sendall(_head(server, framing))
            time.sleep(0.2)
            sock.sendall(b"100\r\nabc" if "chunked" in framing else b"abc")
            time.sleep(0.2)
            _vanish(sock, reset)
            counted = float(n)
            wait_for(lambda: _requests(server, "400") == counted, timeout=5)  # at once, not at the read timeout
    assert _requests(server, "504") == 0  # the read timeout's answer
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert_still_serving(server)


def _chunked(body: bytes, size: int) -> bytes:
    parts = [body[i : i + size] for i in range(0, len(body), size)]
    return b"".join(f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in parts) + b"0\r\n\r\n"


def test_good_chunked_requests_pipelined_in_one_write_are_all_answered(serve: ServeFactory) -> None:
    # The head of a chunked request is parsed apart from what follows it: requests in one read must all still arrive.
    _, server = serve()
    body = good_pb()
    one = _head(server, "Transfer-Encoding: chunked") + _chunked(body, 100)
    plain = _head(server, f"Content-Length: {len(body)}") + body
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(one + plain + one)
        rest = bytearray()
        for _ in range(3):
            status, _, answer = _read_response(sock, buffer=rest)
            assert status == 200
            assert ExportTraceServiceResponse.FromString(answer).partial_success.rejected_spans == 0
    assert _requests(server, "200") == 3


async def test_a_connection_the_hooks_cannot_adjust_is_served_as_aiohttp_does_and_warned_of_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Both guards (chunk framing, broken heads) hook each connection through one helper: when this aiohttp's
    # connections are not what they expect, requests are served unchanged and the gap is logged once, not per
    # connection.
    import asyncio

    from aiohttp import ClientSession, web

    from monitor.serve._framing import _on_each_connection

    async def ok(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/", ok)
    runner = web.AppRunner(app)
    await runner.setup()
    assert runner.server is not None
    seen: list[object] = []

    def cannot(handler: object) -> bool:
        seen.append(handler)
        return False

    _on_each_connection(runner.server, cannot, "cannot adjust this aiohttp")
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        with caplog.at_level(logging.WARNING, logger="monitor.serve._framing"):
            for _ in range(3):  # a new connection each time
                async with ClientSession() as session, session.get(f"http://127.0.0.1:{port}/") as resp:
                    assert resp.status == 200 and await resp.text() == "ok"
            await asyncio.sleep(0)
    finally:
        await runner.cleanup()
    assert len(seen) == 3
    warnings = [r.getMessage() for r in caplog.records if r.name == "monitor.serve._framing"]
    assert warnings == ["cannot adjust this aiohttp"]
