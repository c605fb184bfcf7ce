"""An agent process that forks (multiprocessing's default start method on Linux, prefork servers) keeps working in the
child: a lock another thread held at the fork must not stay held there forever."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import instrumentation as tw
from instrumentation._export import CountingBatchSpanProcessor

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


@tw.tool
def ping(x: int) -> int:
    return x


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[tw.ToolwatchTracerProvider]:
    """Batched OTLP/HTTP export to a port where nothing listens (the monitor down), exporting often. Its warnings are
    not logged: a thread writing to stderr at the fork leaves the stream's own lock held in the child, a hazard of
    forking with threads that is not toolwatch's."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "1")
    loggers = [logging.getLogger(name) for name in ("opentelemetry", "instrumentation")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL + 1)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    p = tw.configure(exporter="otlp-http", endpoint=f"http://127.0.0.1:{port}/v1/traces", set_global=False,
                     schedule_delay_millis=10, max_export_batch_size=64, shutdown_timeout_millis=200)
    try:
        yield p
    finally:
        tw.shutdown(p, timeout_millis=0)
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def _child_finishes(child: Callable[[], None], within: float) -> bool:
    """Fork; the child runs `child` then exits 0. True if it did so within `within` seconds (else it is killed)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            child()
            code = 0
        finally:
            os._exit(code)
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status) == 0
        time.sleep(0.005)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return False


def _call_flush_and_shut_down() -> None:
    assert ping(7) == 7
    tw.shutdown(timeout_millis=200)


def test_a_child_forked_while_another_thread_calls_tools_can_call_tools(
    provider: tw.ToolwatchTracerProvider,
) -> None:
    # Another thread ends spans all the time; the export thread takes them off the queue. A child forked meanwhile
    # sometimes inherited the queue's lock held, and its first tool call waited for it forever (17 of 200 forks here).
    stop = threading.Event()

    def calls() -> None:
        while not stop.is_set():
            ping(1)

    caller = threading.Thread(target=calls, daemon=True)
    caller.start()
    try:
        for _ in range(60):
            assert _child_finishes(_call_flush_and_shut_down, within=5.0)
    finally:
        stop.set()
        caller.join()


@pytest.mark.parametrize("lock", ["queue", "exporter", "flush"])
def test_a_lock_held_at_the_fork_is_free_in_the_child(provider: tw.ToolwatchTracerProvider, lock: str) -> None:
    # The state the race above leaves, made certain: a thread of the parent holds the lock while it forks.
    processor = provider.processor
    assert isinstance(processor, CountingBatchSpanProcessor)
    held = {
        "queue": processor._queue.lock if processor._queue is not None else None,
        "exporter": processor._guard._lock if processor._guard is not None else None,
        "flush": processor._flush_lock,
    }[lock]
    assert held is not None
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with held:
            taken.set()
            release.wait()

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    taken.wait()
    try:
        def child() -> None:
            assert ping(3) == 3
            processor.force_flush(200)  # returns at all (its lock free in the child): True or False, both fine
            processor._guard.abandon() if processor._guard is not None else None  # the exit hook's count
            tw.shutdown(timeout_millis=200)

        assert _child_finishes(child, within=5.0)
    finally:
        release.set()
        holder.join()


def test_a_child_does_not_count_the_parents_export_under_way_as_its_own() -> None:
    # The parent's export thread is in the middle of an export when it forks. That thread does not live on in the child,
    # whose shutdown counted the parent's spans in flight as its own dropped at shutdown (the parent exports them).
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    from instrumentation._stats import STATS

    exporting, release = threading.Event(), threading.Event()

    class Blocking(SpanExporter):
        def export(self, spans: object) -> SpanExportResult:
            exporting.set()
            release.wait(10)
            return SpanExportResult.SUCCESS

        def shutdown(self) -> None:
            pass

    p = tw.configure(exporter=Blocking(), set_global=False, simple=False, schedule_delay_millis=10,
                     shutdown_timeout_millis=200)
    try:
        for i in range(5):
            ping(i)
        assert exporting.wait(5)

        def child() -> None:
            before = STATS.spans_dropped_at_shutdown
            tw.shutdown(p, timeout_millis=200)
            after = STATS.spans_dropped_at_shutdown
            assert after == before  # the child had no span of its own to drop

        assert _child_finishes(child, within=5.0)
    finally:
        release.set()
        tw.shutdown(p, timeout_millis=2000)


def test_objects_with_fork_renewed_locks_leave_nothing_behind_when_gone() -> None:
    # Each lock renewed in a forked child was registered with os.register_at_fork, which keeps its callable for the
    # life of the process: ~490 bytes left behind by every exporter guard, span queue and processor ever built (an
    # application or a test suite that configures toolwatch again and again). Gone objects must leave nothing.
    import gc
    import tracemalloc

    from instrumentation._export import CountingDeque, CountingExporter

    def build(n: int) -> None:
        for _ in range(n):
            CountingDeque(4)
            CountingExporter(InMemorySpanExporter())

    build(100)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        build(2000)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, f"{grown} bytes kept by 4000 objects that are gone"


def test_a_lock_renewed_at_fork_is_renewed_for_every_live_owner_and_none_gone() -> None:
    # One handler serves every owner alive at the fork: each gets a fresh lock in the child, as before.
    from instrumentation._export import CountingDeque

    owners = [CountingDeque(4) for _ in range(3)]
    gone = CountingDeque(4)
    del gone
    for owner in owners:
        owner.lock.acquire()  # held at the fork: the child must not inherit it held

    def child() -> None:
        for owner in owners:
            assert owner.lock.acquire(timeout=1)

    try:
        assert _child_finishes(child, within=5.0)
    finally:
        for owner in owners:
            owner.lock.release()
