"""Fixtures: a fresh TracerProvider + InMemorySpanExporter per test, and default content settings."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import Sampler

import instrumentation
from instrumentation._content import SETTINGS, ContentSettings
from instrumentation._stats import STATS


@dataclass
class Recorded:
    """The spans a test produced."""

    exporter: InMemorySpanExporter
    provider: TracerProvider

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> ReadableSpan:
        found = [s for s in self.spans() if s.name == name]
        assert len(found) == 1, f"expected one span {name!r}, got {[s.name for s in self.spans()]}"
        return found[0]

    def clear(self) -> None:
        self.exporter.clear()


def make_recorded(sampler: Sampler | None = None) -> Recorded:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentation.set_tracer_provider(provider)
    return Recorded(exporter, provider)


@pytest.fixture(autouse=True)
def _reset_settings() -> Iterator[None]:
    saved = SETTINGS.current
    SETTINGS.current = ContentSettings()
    try:
        yield
    finally:
        SETTINGS.current = saved
        instrumentation.set_tracer_provider(None)


@pytest.fixture
def recorded() -> Iterator[Recorded]:
    rec = make_recorded()
    STATS.reset()
    yield rec
    rec.provider.shutdown()


@pytest.fixture
def capture(recorded: Recorded) -> Recorded:
    """`recorded` with content capture on."""
    instrumentation.configure_content(capture_content=True)
    return recorded


@pytest.fixture
def black_hole() -> Iterator[str]:
    """An OTLP/HTTP endpoint on 127.0.0.1 that accepts connections and reads nothing, answers nothing (a monitor that
    hangs)."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1/traces"
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        listener.close()
