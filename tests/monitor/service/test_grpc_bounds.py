"""OTLP/gRPC has the bounds OTLP/HTTP has: connections capped, idle and unfinished ones closed after the read timeout.

Each gRPC connection is a file descriptor and memory in gRPC core; without a bound a pile of idle connections took
every descriptor of the process, and then OTLP/HTTP, /metrics and /healthz could accept nothing."""

from __future__ import annotations

import socket
import struct
import time

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from monitor.serve._grpc import SERVICE
from tests.monitor.service.conftest import ServeFactory, wait_for
from tests.monitor.service.spans import Call, TurnSpec, record_turns

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
SETTINGS = b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # an empty SETTINGS frame: the client's half of the handshake


def _frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes((kind, flags)) + struct.pack(">I", stream) + payload


def _literal(name: bytes, value: bytes) -> bytes:
    """HPACK literal header field without indexing, new name, no Huffman (lengths < 127)."""
    return b"\x00" + bytes((len(name),)) + name + bytes((len(value),)) + value


def _connect(port: int, handshake: bool = True) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    if handshake:
        sock.sendall(PREFACE + SETTINGS)
    return sock


def _closed_by_server(sock: socket.socket, within: float) -> bool:
    """True when the server closes `sock` within `within` seconds (what it sends before, GOAWAY and such, is read)."""
    deadline = time.monotonic() + within
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            if not sock.recv(65536):
                return True
        except TimeoutError:
            return False
        except ConnectionResetError:
            return True
    return False


def _turns(n: int) -> list[TurnSpec]:
    return [TurnSpec(f"look up tag {i}", [Call("pull_auth_telemetry")]) for i in range(n)]


def test_grpc_connections_past_the_cap_are_closed_and_idle_ones_after_the_read_timeout(serve: ServeFactory) -> None:
    _, server = serve(grpc_port=0, max_connections=8, read_timeout_s=1.0)
    assert server.grpc_port
    held = [_connect(server.grpc_port, handshake=i % 2 == 0) for i in range(8)]  # handshaken or not: both count
    time.sleep(0.2)
    extra = _connect(server.grpc_port)
    assert _closed_by_server(extra, within=1.0), "a connection past --max-connections is closed at once"
    extra.close()
    # The real exporter meets the full cap, sees UNAVAILABLE and retries; the idle connections are closed after the
    # read timeout, and its export goes through.
    exporter = GrpcExporter(endpoint=f"127.0.0.1:{server.grpc_port}", insecure=True, timeout=8)
    t0 = time.monotonic()
    assert exporter.export(record_turns(_turns(3))) is SpanExportResult.SUCCESS
    assert time.monotonic() - t0 < 6
    exporter.shutdown()
    for sock in held:
        assert _closed_by_server(sock, within=2.0), "an idle connection is closed after --read-timeout"
        sock.close()
    wait_for(lambda: server.pipeline.turns_judged == 3, timeout=5)


def test_a_grpc_stream_that_never_finishes_sending_is_closed(serve: ServeFactory) -> None:
    _, server = serve(grpc_port=0, read_timeout_s=0.5)
    assert server.grpc_port
    sock = _connect(server.grpc_port)
    headers = b"".join(
        _literal(k, v)
        for k, v in (
            (b":method", b"POST"),
            (b":scheme", b"http"),
            (b":path", f"/{SERVICE}/Export".encode()),
            (b":authority", b"toolwatch"),
            (b"content-type", b"application/grpc"),
            (b"te", b"trailers"),
        )
    )
    # HEADERS (END_HEADERS), then a DATA frame with a message prefix of 1000 bytes and only 10 of them: never ends.
    sock.sendall(_frame(1, 0x4, 1, headers) + _frame(0, 0, 1, b"\x00" + struct.pack(">I", 1000) + b"\x00" * 10))
    t0 = time.monotonic()
    assert _closed_by_server(sock, within=4.0), "a stream held open holds its connection no longer than 2 x timeout"
    assert time.monotonic() - t0 >= 0.3  # closed by the bound, not refused at once
    sock.close()


def test_the_grpc_exporter_keeps_exporting_across_connection_turnover(serve: ServeFactory) -> None:
    # Every connection is told to go after --read-timeout: the exporter's channel reconnects without a failed export.
    _, server = serve(grpc_port=0, read_timeout_s=0.3)
    assert server.grpc_port
    exporter = GrpcExporter(endpoint=f"127.0.0.1:{server.grpc_port}", insecure=True, timeout=5)
    results = []
    for i in range(12):
        results.append(exporter.export(record_turns(_turns(1))))
        time.sleep(0.05 if i % 2 else 0.4)
    exporter.shutdown()
    assert results == [SpanExportResult.SUCCESS] * 12
    wait_for(lambda: server.pipeline.turns_judged == 12, timeout=5)
