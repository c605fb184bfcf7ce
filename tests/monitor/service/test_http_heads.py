"""Broken OTLP/HTTP request heads, sent over raw sockets to a real receiver: each is answered with a google.rpc.Status
in protobuf (no content type can be trusted from a head that does not parse), the connection closed, no traceback
logged, and the receiver goes on serving."""

from __future__ import annotations

import logging
import socket
import time

import pytest
from google.rpc import code_pb2, status_pb2  # type: ignore[import-untyped]
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from monitor.serve import Server
from tests.monitor.service.conftest import ServeFactory, scrape, value
from tests.monitor.service.test_bad_input import PB, assert_still_serving, good_pb
from tests.monitor.service.test_http_framing import _closed, _read_response

_START = f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: {PB}\r\n".encode()

BAD_HEADS = {
    "bad request line": (b"POST /v1/traces HTTX/1.1\r\nHost: x\r\n\r\n", 400),
    "bad method": (b"P@ST /v1/traces HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    "TLS on the plain port": (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(32) + b"\r\n\r\n", 400),
    "invalid header name byte": (_START + b"X-Bad\x01: v\r\n\r\n", 400),
    "invalid header value byte": (_START + b"X-Bad: a\x00b\r\n\r\n", 400),
    "no Host in HTTP/1.1": (f"POST /v1/traces HTTP/1.1\r\nContent-Type: {PB}\r\n\r\n".encode(), 400),
    "header too long": (_START + b"X-Long: " + b"a" * 8191 + b"\r\n\r\n", 431),
    "target too long": (b"POST /v1/traces?" + b"a" * 8190 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 431),
    "too many headers": (_START + b"".join(b"X-%d: v\r\n" % i for i in range(127)) + b"\r\n", 431),
    "Content-Length not a number": (_START + b"Content-Length: abc\r\n\r\n", 400),
    "Content-Length negative": (_START + b"Content-Length: -1\r\n\r\n", 400),
    "two Content-Lengths": (_START + b"Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400),
}


def _bad_heads(server: Server, code: int) -> float:
    return value(scrape(server), "toolwatch_requests_total", transport="http_other", code=str(code)) or 0.0


def _send(server: Server, data: bytes) -> tuple[int, bytes, bytes]:
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(data)
        status, head, body = _read_response(sock)
        assert _closed(sock)
    return status, head, body


@pytest.mark.parametrize(("data", "code"), list(BAD_HEADS.values()), ids=list(BAD_HEADS))
def test_a_broken_head_is_answered_with_a_status_and_no_traceback(
    serve: ServeFactory, data: bytes, code: int, caplog: pytest.LogCaptureFixture
) -> None:
    # Before: aiohttp's text/plain "400 Bad Request" and "Error handling request" with a traceback at ERROR level.
    _, server = serve()
    with caplog.at_level(logging.DEBUG):
        status, head, body = _send(server, data)
    assert status == code, (head, body)
    fields = head.lower()
    assert b"\r\ncontent-type: application/x-protobuf" in fields, head
    assert b"\r\nconnection: close" in fields, head
    rpc = status_pb2.Status.FromString(body)
    want = code_pb2.RESOURCE_EXHAUSTED if code == 431 else code_pb2.INVALID_ARGUMENT
    assert rpc.code == want and rpc.message.startswith("bad request head: "), rpc
    assert len(rpc.message) <= 300  # the client's own bytes are not echoed whole
    assert _bad_heads(server, code) == 1
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR], "a client's bad head"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "bad request head" in warnings[0].getMessage(), warnings
    assert_still_serving(server)


def test_a_storm_of_broken_heads_is_counted_and_logged_once(
    serve: ServeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    _, server = serve()
    data, _ = BAD_HEADS["invalid header name byte"]
    with caplog.at_level(logging.DEBUG):
        for _ in range(20):
            assert _send(server, data)[0] == 400
    assert _bad_heads(server, 400) == 20
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert not [r for r in caplog.records if r.exc_info]
    assert_still_serving(server)


def test_a_broken_head_after_good_requests_on_one_connection_answers_them_first(serve: ServeFactory) -> None:
    _, server = serve()
    body = good_pb()
    good = _START + f"Content-Length: {len(body)}\r\n\r\n".encode() + body
    bad, _ = BAD_HEADS["Content-Length not a number"]
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(good)
        assert _read_response(sock)[0] == 200
        sock.sendall(bad)
        status, _, answer = _read_response(sock)
        assert status == 400 and status_pb2.Status.FromString(answer).code == code_pb2.INVALID_ARGUMENT
        assert _closed(sock)
    assert _bad_heads(server, 400) == 1
    assert_still_serving(server)


def test_a_handler_that_raises_still_gets_aiohttps_500() -> None:
    # Only a head that does not parse is answered by `answer_broken_heads`: a server error stays a server error.
    import asyncio

    from aiohttp import web

    from monitor.serve._framing import answer_broken_heads

    answered: list[str] = []

    async def fail(_: web.BaseRequest) -> web.StreamResponse:
        raise RuntimeError("boom")

    def answer(exc: Exception, remote: str | None) -> web.StreamResponse:
        answered.append(str(exc))
        return web.Response(status=400)

    async def run() -> tuple[bytes, bytes]:
        server = web.Server(fail)
        answer_broken_heads(server, answer)
        listener = await asyncio.get_running_loop().create_server(server, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        try:
            replies = []
            for data in (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"GET / HTTX/1.1\r\nHost: x\r\n\r\n"):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(data)
                replies.append(await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10))
                writer.close()
            return replies[0], replies[1]
        finally:
            listener.close()
            await server.shutdown(1)

    error, bad_head = asyncio.run(run())
    assert error.startswith(b"HTTP/1.1 500 ") and b"text/plain" in error, error
    assert bad_head.startswith(b"HTTP/1.0 400 ") and len(answered) == 1 and "Bad status line" in answered[0]


def _spans_received(server: Server) -> float:
    return value(scrape(server), "toolwatch_spans_received_total", transport="http_protobuf") or 0.0


@pytest.mark.parametrize("reads", ["one write", "split mid-body"])
@pytest.mark.parametrize(
    "bad", ["Content-Length not a number", "bad method", "invalid header name byte", "bad method, head unfinished"]
)
def test_good_requests_pipelined_before_a_broken_head_are_all_answered_and_counted(
    serve: ServeFactory, bad: str, reads: str
) -> None:
    # Before: a broken head in the same read as complete requests before it lost them (the parser raised for the
    # whole read): no answer, their spans never counted; only the 400 came back.
    _, server = serve()
    body = good_pb()
    good = _START + f"Content-Length: {len(body)}\r\n\r\n".encode() + body
    broken = b"P@ST /v1/tr" if bad == "bad method, head unfinished" else BAD_HEADS[bad][0]
    data = good + good + good + broken
    per_request = _spans_received(server)
    assert_still_serving(server)
    per_request = _spans_received(server) - per_request
    assert per_request > 0
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if reads == "one write":
            sock.sendall(data)
        else:  # the first request's body ends in the read that holds the others and the broken head
            cut = len(_START) + 30 + len(body) // 2
            sock.sendall(data[:cut])
            time.sleep(0.2)
            sock.sendall(data[cut:])
        rest = bytearray()
        for _ in range(3):
            status, head, answer = _read_response(sock, buffer=rest)
            assert status == 200, (head, answer)
            assert ExportTraceServiceResponse.FromString(answer).partial_success.rejected_spans == 0
        status, _, answer = _read_response(sock, buffer=rest)
        assert status == 400 and status_pb2.Status.FromString(answer).code == code_pb2.INVALID_ARGUMENT
        assert _closed(sock)
    assert _bad_heads(server, 400) == 1
    assert value(scrape(server), "toolwatch_requests_total", transport="http_protobuf", code="200") == 4
    assert _spans_received(server) == 4 * per_request
    assert_still_serving(server)
