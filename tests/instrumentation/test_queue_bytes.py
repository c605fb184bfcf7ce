"""The agent's export queue is bounded in bytes too: with the monitor down and content capture on, a full queue of
spans each holding tens of KB of content stays within `max_queue_bytes`, the oldest spans dropped and counted."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

import instrumentation as tw
from instrumentation._export import DEFAULT_MAX_QUEUE_BYTES, CountingBatchSpanProcessor, CountingDeque, queued_size
from instrumentation._stats import STATS

CONTENT = "x" * 20_000  # about 20 KB of arguments, and as much in the result: each cut at 16384 characters


@tw.tool
def echo(text: str) -> str:
    return text


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _queue(provider: tw.ToolwatchTracerProvider) -> CountingDeque:
    processor = provider.processor
    assert isinstance(processor, CountingBatchSpanProcessor) and processor._queue is not None
    return processor._queue


def _consistent(queue: CountingDeque) -> None:
    """What the queue counts is what it holds: one size per span, their sum its bytes."""
    with queue.lock:
        assert len(queue._sizes) == len(queue)
        assert sum(queue._sizes) == queue.bytes


@pytest.fixture
def silent_endpoint(black_hole: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A monitor that hangs (`black_hole`), with the exporter waiting long for it and the drop counts at 0."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "120")
    STATS.reset()
    return black_hole


def test_a_hung_monitor_leaves_the_queue_and_the_agents_memory_within_the_byte_bound(silent_endpoint: str) -> None:
    """20,000 calls of a tool handling about 20 KB of content, the monitor hanging: the queue held 16384 spans of
    about 36 KB each, and the agent grew by about 600 MiB. Now the queue stays within its 64 MiB, the oldest spans
    dropped and counted; every span is queued, in the export under way, or counted as dropped."""
    provider = tw.configure(exporter="otlp-http", endpoint=silent_endpoint, capture_content=True, set_global=False)
    queue = _queue(provider)
    assert queue.max_bytes == DEFAULT_MAX_QUEUE_BYTES == 64 << 20
    before = _rss()
    peak = 0
    for i in range(20_000):
        assert echo(CONTENT) == CONTENT
        if i % 500 == 0:
            peak = max(peak, queue.bytes)
    peak = max(peak, queue.bytes)
    grown = _rss() - before
    _consistent(queue)
    assert 0 < peak <= queue.max_bytes
    guard = provider.processor._guard  # type: ignore[union-attr]
    assert guard is not None
    stats = tw.telemetry_stats()
    assert stats.spans_dropped_queue_bytes > 10_000 and stats.spans_dropped_queue_full == 0
    assert stats.spans_exported == 0
    assert (len(queue) + guard._in_flight + stats.spans_dropped_queue_bytes + stats.spans_export_failed) == 20_000
    assert stats.dropped_spans == stats.spans_dropped_queue_bytes + stats.spans_export_failed
    # The queue's 64 MiB, plus what the exporter holds (the batch under way, 512 spans of about 36 KB, and an 8 MiB
    # request: 90 MiB traced in all), plus the allocator's slack (the export thread's arena): 128 MiB measured,
    # against 621 MiB before.
    assert grown < queue.max_bytes + (96 << 20), f"grew by {grown / 2**20:.0f} MiB"
    tw.shutdown(provider, timeout_millis=0)
    assert len(queue) == 0 and queue.bytes == 0 and not queue._sizes


class BlockedExporter(SpanExporter):
    """Blocks every export until released; counts what it was given."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.exported = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.entered.set()
        self.release.wait()
        self.exported += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.release.set()


def test_drops_by_bytes_are_counted_exactly_and_the_count_returns_to_zero_when_the_queue_drains() -> None:
    STATS.reset()
    exporter = BlockedExporter()
    bound = 2 << 20
    provider = tw.configure(exporter=exporter, capture_content=True, set_global=False, max_queue_bytes=bound,
                            max_export_batch_size=64, schedule_delay_millis=10)
    queue = _queue(provider)
    assert queue.max_bytes == bound
    echo("first")
    assert exporter.entered.wait(5)  # one span in the export under way, the exporter blocked
    calls = 2_000
    for _ in range(calls):
        echo(CONTENT)
        assert queue.bytes <= bound
    _consistent(queue)
    held = len(queue)
    assert 0 < held < 100  # about 2 MiB of spans of about 36 KB each
    stats = tw.telemetry_stats()
    assert stats.spans_dropped_queue_bytes == calls - held and stats.spans_dropped_queue_full == 0
    assert tw.dropped_spans() == calls - held
    exporter.release.set()
    assert provider.force_flush(10_000)
    assert len(queue) == 0 and queue.bytes == 0 and not queue._sizes
    assert exporter.exported == 1 + held
    tw.shutdown(provider)


def test_the_byte_bound_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLWATCH_MAX_QUEUE_BYTES", str(8 << 20))
    provider = tw.configure(exporter="memory", simple=False, set_global=False)
    assert _queue(provider).max_bytes == 8 << 20
    provider.shutdown()
    monkeypatch.setenv("TOOLWATCH_MAX_QUEUE_BYTES", "lots")  # warns, keeps the default
    provider = tw.configure(exporter="memory", simple=False, set_global=False)
    assert _queue(provider).max_bytes == DEFAULT_MAX_QUEUE_BYTES
    provider.shutdown()
    with pytest.raises(ValueError, match="max_queue_bytes"):
        tw.configure(exporter="memory", simple=False, set_global=False, max_queue_bytes=0)


def test_a_span_over_the_bound_alone_is_still_queued_and_the_count_drops_it_exactly() -> None:
    """An empty queue takes any span (it is exported, not refused); the next one pushes it out, counted."""
    queue = CountingDeque(100, max_bytes=1000)
    STATS.reset()
    queue.appendleft_sized("big", 5000)
    assert (len(queue), queue.bytes) == (1, 5000)
    queue.appendleft_sized("small", 10)
    assert (list(queue), queue.bytes, STATS.spans_dropped_queue_bytes) == (["small"], 10, 1)
    assert queue.pop() == "small" and queue.bytes == 0


def test_the_count_never_drifts_under_concurrent_appends_pops_and_drops() -> None:
    queue = CountingDeque(50, max_bytes=4000)
    STATS.reset()
    popped = [0]
    done = threading.Event()

    def consume() -> None:
        while not done.is_set() or queue:
            try:
                queue.pop()
                popped[0] += 1
            except IndexError:
                time.sleep(0)

    consumer = threading.Thread(target=consume)
    consumer.start()

    def produce(seed: int) -> None:
        for i in range(5000):
            queue.appendleft_sized(i, 1 + (i * seed) % 300)

    producers = [threading.Thread(target=produce, args=(s,)) for s in (7, 13, 31)]
    for t in producers:
        t.start()
    for t in producers:
        t.join()
    done.set()
    consumer.join()
    assert queue.bytes == 0 and not queue._sizes
    assert popped[0] + STATS.spans_dropped_queue_bytes + STATS.spans_dropped_queue_full == 15_000


def test_the_size_counts_the_content_the_instrumentation_sets() -> None:
    """`queued_size` reads only the content attributes and the error status / events, not every attribute: what a
    span holds beyond a fixed part is its content."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tw.set_tracer_provider(provider)
    tw.configure_content(capture_content=True)

    @tw.tool
    def fails(text: str) -> str:
        raise ValueError(text)

    echo("é" * 20_000)
    with pytest.raises(ValueError):
        fails(CONTENT)
    wide, failed_span = exporter.get_finished_spans()
    # Non-ASCII text counted at 4 bytes a character (what it may take in UTF-8), arguments and result.
    assert queued_size(wide) >= 2 * 4 * 16384
    # The failed call: its arguments, its status description and its exception event (message and stack trace).
    assert queued_size(failed_span) >= 16384 + 3 * 16000


class CountingExporterFast(SpanExporter):
    """Exports at once, counting what it was given (a healthy monitor)."""

    def __init__(self) -> None:
        self.exported = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.exported += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def test_a_burst_of_large_spans_with_a_healthy_exporter_is_exported_not_dropped() -> None:
    """Spans of non-ASCII content (about 130 KB each by queued_size): the byte bound holds fewer than a batch (512),
    so the SDK's worker, woken only at a full batch, slept its schedule delay while the oldest were dropped: 1500 of
    2000 lost with the exporter idle. The worker is woken, and exports, once the queue holds half its bytes."""
    STATS.reset()
    exporter = CountingExporterFast()
    provider = tw.configure(exporter=exporter, capture_content=True, set_global=False, simple=False)
    for _ in range(2000):
        echo("é" * 20_000)
        time.sleep(0.0005)  # the export thread gets its turn, as in an agent doing work between calls
    assert provider.force_flush(10_000)
    stats = tw.telemetry_stats()
    assert stats.spans_dropped_queue_bytes == 0
    assert exporter.exported == 2000
    tw.shutdown(provider)


def test_drops_by_bytes_are_warned_of_at_most_every_20_seconds(caplog: pytest.LogCaptureFixture) -> None:
    """The SDK logs its drops by count ("Queue full"); drops by bytes were only counted, so with the monitor down a
    user saw nothing unless they read telemetry_stats()."""
    queue = CountingDeque(100, max_bytes=1000)
    with caplog.at_level("WARNING", logger="instrumentation._export"):
        for i in range(50):
            queue.appendleft_sized(i, 400)
    warnings = [r.getMessage() for r in caplog.records if "byte bound" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "1000 bytes" in warnings[0] and "dropped the oldest" in warnings[0]
