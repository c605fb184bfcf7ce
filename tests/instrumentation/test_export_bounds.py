"""With the monitor down, flushing and shutting down keep to their timeouts and count every span they give up."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import instrumentation as tw
from instrumentation._export import span_size
from instrumentation._stats import STATS


@tw.tool
def ping(x: int) -> int:
    return x


@pytest.fixture
def down_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An OTLP/HTTP endpoint on 127.0.0.1 where nothing listens (the monitor is down); each export tries for 2 s."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "2")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    STATS.reset()
    yield f"http://127.0.0.1:{port}/v1/traces"


def _spans(n: int) -> None:
    for i in range(n):
        assert ping(i) == i


def test_shutdown_keeps_to_its_timeout_when_the_monitor_is_down(down_endpoint: str) -> None:
    # The SDK's force_flush ignores its timeout and exports every queued batch in the caller's thread, each retried
    # for the exporter's whole timeout: shutdown(timeout_millis=500) took 4 x 2 s here, and 234 s for a full queue
    # (16384 spans) with the default 10 s export timeout.
    provider = tw.configure(
        exporter="otlp-http", endpoint=down_endpoint, set_global=False, schedule_delay_millis=60_000
    )
    _spans(2048)  # 4 batches of 512, all still queued
    t0 = time.monotonic()
    tw.shutdown(provider, timeout_millis=500)
    assert time.monotonic() - t0 < 3.0  # against 8 s before; room for a busy machine
    # What was left in the queue is counted at once; the batch whose export was under way when it is (cut short by
    # the exporter's shutdown).
    deadline = time.monotonic() + 5
    while tw.telemetry_stats().dropped_spans < 2048 and time.monotonic() < deadline:
        time.sleep(0.05)
    stats = tw.telemetry_stats()
    assert stats.spans_exported == 0
    assert stats.dropped_spans == 2048  # none lost uncounted
    assert stats.spans_dropped_queue_full == 0  # the queue never filled: what was left is counted as such
    assert stats.spans_dropped_at_shutdown > 0 and stats.spans_dropped_at_shutdown + stats.spans_export_failed == 2048


def test_force_flush_keeps_to_its_timeout_when_the_monitor_is_down(down_endpoint: str) -> None:
    provider = tw.configure(
        exporter="otlp-http", endpoint=down_endpoint, set_global=False, schedule_delay_millis=60_000
    )
    _spans(2048)
    try:
        for _ in range(3):  # an agent flushing at the end of each request: none blocks past its timeout
            t0 = time.monotonic()
            assert provider.force_flush(300) is False
            assert time.monotonic() - t0 < 2.0  # a flush of 4 batches takes 8 s here
    finally:
        tw.shutdown(provider, timeout_millis=500)


def test_force_flush_says_false_when_nothing_could_be_flushed() -> None:
    # The SDK's force_flush is False after shutdown (the spans ended since are dropped, not exported); the flush that
    # keeps to its timeout ran it in a thread and said True whenever that thread had ended, whatever it returned.
    exporter = InMemorySpanExporter()
    provider = tw.configure(exporter=exporter, set_global=False, simple=False, schedule_delay_millis=60_000)
    _spans(3)
    assert provider.force_flush(5000) is True
    assert len(exporter.get_finished_spans()) == 3
    tw.shutdown(provider, timeout_millis=5000)
    _spans(2)
    assert provider.force_flush(5000) is False
    assert len(exporter.get_finished_spans()) == 3


def test_shutdown_without_a_timeout_keeps_to_the_configured_one(down_endpoint: str) -> None:
    provider = tw.configure(
        exporter="otlp-http", endpoint=down_endpoint, set_global=False, schedule_delay_millis=60_000,
        shutdown_timeout_millis=300,
    )
    _spans(5)
    t0 = time.monotonic()
    tw.shutdown(provider)
    assert time.monotonic() - t0 < 1.5  # 2 s and more before: the default was 30 s, the retries' own end came first
    assert tw.telemetry_stats().spans_dropped_at_shutdown == 5  # the export under way counted at once


@tw.tool
def fetch(url: str) -> str:
    return "p" * 20_000


@pytest.mark.parametrize("big", [False, True], ids=["one request", "a batch split in several requests"])
def test_an_export_given_up_at_shutdown_that_succeeds_later_counts_as_exported(big: bool) -> None:
    # A slow monitor: the export under way when the shutdown's timeout ends is counted as dropped at once (at exit it
    # would never end), and as exported instead when it does end well. A batch too large for one request is in
    # flight whole: the parts not sent yet are counted too.
    release = threading.Event()
    received: list[int] = []

    class Slow(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            release.wait(10)
            request = ExportTraceServiceRequest.FromString(body)
            received.append(sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    STATS.reset()
    try:
        provider = tw.configure(
            exporter="otlp-http", endpoint=f"http://127.0.0.1:{server.server_address[1]}/v1/traces",
            set_global=False, schedule_delay_millis=60_000, capture_content=big, max_export_batch_size=512,
        )
        n = 512 if big else 7
        for i in range(n):
            if big:
                fetch(f"{i}" + "u" * 20_000)
            else:
                ping(i)
        tw.shutdown(provider, timeout_millis=300)
        stats = tw.telemetry_stats()
        assert (stats.spans_dropped_at_shutdown, stats.spans_exported) == (n, 0)
        release.set()
        deadline = time.monotonic() + 10
        while not (received and tw.telemetry_stats().spans_exported == received[0]) and time.monotonic() < deadline:
            time.sleep(0.02)
        stats = tw.telemetry_stats()
        # The request under way ends well and counts as exported; a split batch's parts not sent before the exporter
        # was shut down stay counted as dropped at shutdown: every span counted once.
        assert len(received) == 1 and (received[0] < n) is big
        assert (stats.spans_exported, stats.spans_dropped_at_shutdown) == (received[0], n - received[0])
        assert stats.dropped_spans == n - received[0] and stats.spans_export_failed == 0
    finally:
        release.set()
        server.shutdown()
        server.server_close()


def test_a_negative_shutdown_timeout_is_refused() -> None:
    with pytest.raises(ValueError, match="shutdown_timeout_millis"):
        tw.configure(exporter="none", set_global=False, shutdown_timeout_millis=-1)


@pytest.mark.parametrize(
    "attributes",
    [
        {"a": "x" * 16384, "b": "y" * 16384},
        {f"k{i}": i for i in range(100)},
        {f"key_{i}": "v" for i in range(120)},
        {"list": tuple("x" for _ in range(10_000))},
        {"list": tuple("" for _ in range(10_000))},
        {"cjk": "漢" * 5000, "mixed": ("é", "ü", 3, 2.5, True)},
    ],
    ids=["two long values", "100 small ints", "120 short strings", "10,000 one-letter items", "10,000 empty items",
         "non-ASCII"],
)
def test_the_size_estimate_is_at_least_the_encoded_size(attributes: dict[str, Any]) -> None:
    """Batches are split by this estimate to stay under the receiver's body limit: it must not be below what the OTLP
    encoder writes (a list of 10,000 empty strings was 310 times under)."""
    provider = tw.configure(exporter="memory", set_global=False)
    try:
        with provider.get_tracer("t").start_as_current_span("execute_tool t", attributes=attributes) as span:
            span.add_event("exception", {"exception.message": "m" * 100, "exception.type": "ValueError"})
        assert isinstance(provider.exporter, InMemorySpanExporter)
        [finished] = provider.exporter.get_finished_spans()
    finally:
        provider.shutdown()
    encoded = len(encode_spans([finished]).SerializeToString())
    # The request's resource and scope come once per request (well within the room MAX_EXPORT_BYTES leaves).
    assert encoded <= span_size(finished) + 1024 and span_size(finished) <= 4 * encoded + 1024
