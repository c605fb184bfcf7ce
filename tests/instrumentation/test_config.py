"""`configure()`: exporters, environment variables, the global provider, and counted drops and failures."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from grpc import Compression  # type: ignore[import-untyped]
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import instrumentation as tw
from instrumentation._config import _install_global
from instrumentation._content import ContentSettings
from instrumentation._stats import STATS


@pytest.fixture
def providers() -> Iterator[list[TracerProvider]]:
    made: list[TracerProvider] = []
    STATS.reset()
    yield made
    for provider in made:
        provider.shutdown()


@tw.tool
def ping(x: int) -> int:
    return x


def test_memory_exporter(providers: list[TracerProvider]) -> None:
    before = trace.get_tracer_provider()
    provider = tw.configure(exporter="memory", service_name="svc", capture_content=True, set_global=False)
    providers.append(provider)
    assert isinstance(provider.exporter, InMemorySpanExporter)
    assert trace.get_tracer_provider() is before
    ping(3)
    [span] = provider.exporter.get_finished_spans()
    assert span.name == "execute_tool ping"
    assert span.resource.attributes["service.name"] == "svc"
    assert (span.attributes or {})["gen_ai.tool.call.arguments"] == '{"x":3}'
    assert STATS.spans_exported == 1


def test_console_exporter(providers: list[TracerProvider], capsys: pytest.CaptureFixture[str]) -> None:
    provider = tw.configure(exporter="console", set_global=False)
    providers.append(provider)
    ping(1)
    provider.force_flush()
    assert '"name": "execute_tool ping"' in capsys.readouterr().out


def test_env_selects_exporter_and_protocol(providers: list[TracerProvider], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:9/v1/traces")
    provider = tw.configure(set_global=False)
    providers.append(provider)
    assert isinstance(provider.exporter, HttpExporter)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    provider = tw.configure(set_global=False)
    providers.append(provider)
    assert isinstance(provider.exporter, GrpcExporter)
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    provider = tw.configure(set_global=False)
    providers.append(provider)
    assert provider.exporter is None


def test_bad_env_values_warn_and_fall_back(
    providers: list[TracerProvider], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin-ish")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon")
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "lots")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "maybe")
    monkeypatch.setenv("TOOLWATCH_MAX_CONTENT_LENGTH", "-5")
    with caplog.at_level(logging.WARNING):
        provider = tw.configure(endpoint="http://127.0.0.1:9", set_global=False)
        settings = ContentSettings.from_env()
    providers.append(provider)
    assert isinstance(provider.exporter, HttpExporter)
    assert provider.exporter._endpoint == "http://127.0.0.1:9/v1/traces"
    assert isinstance(provider.processor, tw.CountingBatchSpanProcessor)
    assert provider.processor._queue is not None
    assert provider.processor._queue.maxlen == tw.DEFAULT_MAX_QUEUE_SIZE == 16384
    assert settings.capture_content is False and settings.max_length == 16384
    text = caplog.text
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_BSP_MAX_QUEUE_SIZE",
                 "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "TOOLWATCH_MAX_CONTENT_LENGTH"):
        assert name in text


def test_span_limits_the_sdk_raises_on_warn_and_the_rest_still_apply(
    providers: list[TracerProvider], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The SDK raised ValueError at configure() for these, stopping the agent at start-up; a valid limit beside them
    still applies, and the environment is left as it was."""
    bad = {"OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT": "abc", "OTEL_ATTRIBUTE_COUNT_LIMIT": "-5",
           "OTEL_SPAN_EVENT_COUNT_LIMIT": "x"}
    for name, value in bad.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OTEL_SPAN_LINK_COUNT_LIMIT", "7")
    monkeypatch.setenv("OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT", " ")  # the SDK's "no limit"
    with caplog.at_level(logging.WARNING):
        provider = tw.configure(exporter="memory", capture_content=True, set_global=False)
    providers.append(provider)
    limits = provider._span_limits
    assert limits.max_links == 7 and limits.max_event_attributes is None
    assert limits.max_attribute_length is None and limits.max_events == 128  # the SDK's defaults
    for name, value in bad.items():
        assert f"ignoring {name}={value!r}" in caplog.text
        assert os.environ[name] == value
    assert "OTEL_SPAN_LINK_COUNT_LIMIT" not in caplog.text
    assert ping(4) == 4
    assert isinstance(provider.exporter, InMemorySpanExporter)
    [span] = provider.exporter.get_finished_spans()
    assert span.name == "execute_tool ping"


@pytest.mark.parametrize(
    ("name", "value", "warned"),
    [
        ("OTEL_EXPORTER_OTLP_COMPRESSION", "bogus", True),
        ("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "deflate", True),
        ("OTEL_EXPORTER_OTLP_COMPRESSION", "none", False),  # the specification's value, which the exporter refuses
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "abc", True),
        ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "10s", True),
    ],
)
def test_grpc_exporter_settings_it_raises_on_warn_and_fall_back(
    providers: list[TracerProvider], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, name: str,
    value: str, warned: bool,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv(name, value)
    with caplog.at_level(logging.WARNING):
        provider = tw.configure(set_global=False)
    providers.append(provider)
    assert isinstance(provider.exporter, GrpcExporter)
    assert (f"ignoring {name}={value!r}" in caplog.text) is warned
    assert os.environ[name] == value
    monkeypatch.setenv(name, "gzip" if "COMPRESSION" in name else "2.5")  # valid ones are the exporter's
    provider = tw.configure(set_global=False)
    providers.append(provider)
    exporter: Any = provider.exporter
    assert exporter._compression == Compression.Gzip if "COMPRESSION" in name else exporter._timeout == 2.5


@pytest.mark.parametrize(("exporter", "warned"), [("otlp-http", True), ("otlp-grpc", True), ("memory", False),
                                                  ("console", False)])
def test_simple_with_a_network_exporter_is_warned_of(
    providers: list[TracerProvider], caplog: pytest.LogCaptureFixture, exporter: Any, warned: bool
) -> None:
    """simple=True exports on the tool's own thread: against a dead endpoint a tool call took 7.6-10 s."""
    with caplog.at_level(logging.WARNING):
        provider = tw.configure(exporter=exporter, endpoint="http://127.0.0.1:9", simple=True, set_global=False)
    providers.append(provider)
    assert ("every tool call waits for its export" in caplog.text) is warned


@pytest.mark.parametrize(("value", "expected"), [("true", True), ("TRUE", True), ("span_only", True),
                                                 ("false", False), ("no_content", False), ("", False)])
def test_capture_env(monkeypatch: pytest.MonkeyPatch, value: str, expected: bool) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", value)
    assert ContentSettings.from_env().capture_content is expected


@pytest.mark.parametrize(
    ("standard", "ours", "expected"),
    [(None, None, True), ("", None, True), ("true", None, True), ("false", None, False), ("no_content", None, False),
     ("0", None, False), ("false", "true", True), (None, "false", False), ("true", "false", False)],
)
def test_turn_messages_follow_an_explicit_no_of_the_standard_variable(
    monkeypatch: pytest.MonkeyPatch, standard: str | None, ours: str | None, expected: bool
) -> None:
    # OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=false says "no message content": the turn's input and answer
    # were recorded anyway; unset, they are recorded (the monitor routes on the input)
    for name, value in (("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", standard),
                        ("TOOLWATCH_CAPTURE_TURN_MESSAGES", ours)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert ContentSettings.from_env().capture_turn_messages is expected


@pytest.mark.parametrize(("name", "value", "warning"), [
    # the SDK's default batch (512) over a queue of 100: BatchSpanProcessor raised ValueError out of configure()
    ("OTEL_BSP_MAX_QUEUE_SIZE", "100", "export batch size 512 is larger than the export queue (100 spans)"),
    # the SDK reads these itself and raised ValueError for 0 or less: configure() failed, the agent did not start
    ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "0", "ignoring OTEL_BSP_MAX_EXPORT_BATCH_SIZE='0'"),
    ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "-5", "ignoring OTEL_BSP_MAX_EXPORT_BATCH_SIZE='-5'"),
    ("OTEL_BSP_SCHEDULE_DELAY", "0", "ignoring OTEL_BSP_SCHEDULE_DELAY='0'"),
])
def test_a_batch_setting_the_sdk_refuses_warns_and_the_agent_starts(
    providers: list[TracerProvider], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
    name: str, value: str, warning: str,
) -> None:
    monkeypatch.setenv(name, value)
    with caplog.at_level(logging.WARNING):
        provider = tw.configure(exporter="memory", simple=False, set_global=False)
    providers.append(provider)
    assert warning in caplog.text
    assert isinstance(provider.processor, tw.CountingBatchSpanProcessor)
    with provider.get_tracer("t").start_as_current_span("s"):
        pass
    provider.force_flush()
    exporter = provider.exporter
    assert isinstance(exporter, InMemorySpanExporter)
    assert [s.name for s in exporter.get_finished_spans()] == ["s"]


def test_invalid_arguments_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="unknown exporter"):
        tw.configure(exporter="kafka", set_global=False)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_queue_size"):
        tw.configure(exporter="memory", max_queue_size=0, set_global=False)
    with pytest.raises(ValueError, match=r"max_export_batch_size \(1000\) must not exceed max_queue_size \(100\)"):
        tw.configure(exporter="memory", simple=False, max_queue_size=100, max_export_batch_size=1000, set_global=False)
    with pytest.raises(ValueError, match="max_length"):
        tw.configure_content(max_content_length=3)


def test_global_provider_is_not_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    existing, ours = TracerProvider(), TracerProvider()
    installed: list[Any] = []
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: existing)
    monkeypatch.setattr(trace, "set_tracer_provider", installed.append)
    _install_global(ours, None)
    _install_global(ours, True)  # asked, but OpenTelemetry forbids replacing: warns, keeps the existing one
    assert installed == []
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: trace.ProxyTracerProvider())
    _install_global(ours, False)
    assert installed == []
    _install_global(ours, None)
    assert installed == [ours]


class BlockingExporter(SpanExporter):
    def __init__(self) -> None:
        self.release = threading.Event()
        self.exported = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.release.wait(10)
        self.exported += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.release.set()


def test_full_queue_drops_are_counted(providers: list[TracerProvider]) -> None:
    exporter = BlockingExporter()
    provider = tw.configure(exporter=exporter, max_queue_size=8, max_export_batch_size=4, set_global=False)
    providers.append(provider)
    for i in range(100):
        assert ping(i) == i
    exporter.release.set()
    provider.force_flush()
    assert tw.dropped_spans() > 0
    assert exporter.exported + STATS.spans_dropped_queue_full == 100
    assert provider.dropped_spans() == STATS.spans_dropped_queue_full


class FailingExporter(SpanExporter):
    def __init__(self, raise_: bool) -> None:
        self.raise_ = raise_

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.raise_:
            raise ConnectionError("collector down")
        return SpanExportResult.FAILURE

    def shutdown(self) -> None:
        pass


@pytest.mark.parametrize("raise_", [True, False])
def test_failing_exporter_is_counted_not_raised(providers: list[TracerProvider], raise_: bool) -> None:
    provider = tw.configure(exporter=FailingExporter(raise_), simple=True, set_global=False)
    providers.append(provider)
    assert ping(1) == 1 and ping(2) == 2
    stats = tw.telemetry_stats()
    assert stats.export_failures == 2 and stats.spans_export_failed == 2 and stats.dropped_spans == 2


@pytest.mark.parametrize(("protocol", "name", "value", "warned"), [
    ("http/protobuf", "OTEL_EXPORTER_OTLP_TIMEOUT", "10000", True),
    ("grpc", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "5000", True),
    ("http/protobuf", "OTEL_EXPORTER_OTLP_TIMEOUT", "10", False),
    ("grpc", "OTEL_EXPORTER_OTLP_TIMEOUT", "2.5", False),
])
def test_a_timeout_given_in_milliseconds_is_warned_of(
    providers: list[TracerProvider], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
    protocol: str, name: str, value: str, warned: bool,
) -> None:
    """The specification gives OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT in milliseconds; the Python exporters read
    seconds: 10000, as written for other SDKs or the Collector, became 10000 s per export (each batch against a
    monitor that never answers held the export thread for hours while the queue dropped). Kept, as the SDK reads
    it, and warned of."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv(name, value)
    with caplog.at_level(logging.WARNING):
        provider = tw.configure(set_global=False)
    providers.append(provider)
    exporter: Any = provider.exporter
    timeout = exporter._timeout if hasattr(exporter, "_timeout") else exporter._client._timeout  # HTTP: in its client
    assert timeout == float(value)
    assert (f"{name}={value!r} is read as seconds" in caplog.text) is warned
