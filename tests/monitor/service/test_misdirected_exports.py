"""Exporters pointed at the receiver the wrong way, as a new user's first configuration often is: real OTLP exporters
against a real `serve`. The exporter only logs "404 Not Found" (or a failed HTTP/2 handshake), so the server's log
must say what was wrong and what to set instead."""

from __future__ import annotations

import logging

import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.monitor.service.conftest import ServeFactory
from tests.monitor.service.http_util import post
from tests.monitor.service.test_bad_input import PB, assert_still_serving, good_pb


def _spans() -> tuple[ReadableSpan, ...]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("tests").start_as_current_span("execute_tool pull_auth_telemetry"):
        pass
    provider.shutdown()
    return memory.get_finished_spans()


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and r.name.startswith("monitor.")]


@pytest.mark.parametrize("path", ["", "/v1/traces/v1/traces"], ids=["no path", "path twice"])
def test_an_exporter_on_the_wrong_path_is_told_the_right_one_in_the_log(
    serve: ServeFactory, caplog: pytest.LogCaptureFixture, path: str
) -> None:
    # OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is the whole URL (no /v1/traces added), OTEL_EXPORTER_OTLP_ENDPOINT the base
    # (/v1/traces added): either set to the other's value posts to a path that is answered 404. Before, the server
    # counted it in toolwatch_requests_total{code="404"} and said nothing.
    _, server = serve()
    base = server.endpoint.removesuffix("/v1/traces")
    exporter = OTLPSpanExporter(endpoint=base + path, timeout=10)
    with caplog.at_level(logging.INFO):
        assert exporter.export(_spans()) is SpanExportResult.FAILURE
    exporter.shutdown()  # type: ignore[no-untyped-call]
    warnings = [w for w in _warnings(caplog) if "404" in w]
    assert len(warnings) == 1, _warnings(caplog)
    assert repr(path or "/") in warnings[0] and "/v1/traces" in warnings[0], warnings
    assert "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" in warnings[0] and server.endpoint in warnings[0], warnings
    assert_still_serving(server)


def test_a_storm_of_wrong_paths_is_logged_once(serve: ServeFactory, caplog: pytest.LogCaptureFixture) -> None:
    _, server = serve()
    base = server.endpoint.removesuffix("/v1/traces")
    with caplog.at_level(logging.INFO):
        for _ in range(20):
            assert post(f"{base}/", good_pb(), PB)[0] == 404
    assert len([w for w in _warnings(caplog) if "404" in w]) == 1, _warnings(caplog)


@pytest.mark.parametrize("signal", ["metrics", "logs"])
def test_other_signals_sent_here_are_told_toolwatch_takes_traces_only(
    serve: ServeFactory, caplog: pytest.LogCaptureFixture, signal: str
) -> None:
    # OTEL_EXPORTER_OTLP_ENDPOINT set for the whole SDK sends metrics and logs here too.
    _, server = serve()
    base = server.endpoint.removesuffix("/v1/traces")
    with caplog.at_level(logging.INFO):
        assert post(f"{base}/v1/{signal}", b"", PB)[0] == 404
    warnings = [w for w in _warnings(caplog) if "404" in w]
    assert len(warnings) == 1 and "traces only" in warnings[0], _warnings(caplog)
    assert f"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT={server.endpoint}" in warnings[0], warnings


def test_a_grpc_exporter_on_the_http_port_is_told_of_grpc_port(
    serve: ServeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    # OTEL_EXPORTER_OTLP_PROTOCOL=grpc with the OTLP/HTTP port: the log said only
    # "bad request head ... answered 400: Pause on PRI/Upgrade: b''".
    _, server = serve()
    exporter = GrpcExporter(endpoint=f"127.0.0.1:{server.port}", insecure=True, timeout=2)
    with caplog.at_level(logging.INFO):
        assert exporter.export(_spans()) is SpanExportResult.FAILURE
    exporter.shutdown()
    warnings = [w for w in _warnings(caplog) if "bad request head" in w]
    assert warnings and "--grpc-port" in warnings[0] and "HTTP/2" in warnings[0], _warnings(caplog)
    assert_still_serving(server)
