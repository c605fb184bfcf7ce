"""An OTLP/gRPC endpoint written without a scheme (`127.0.0.1:4317`) makes the exporter use TLS, which a plaintext
receiver refuses: `configure()` says so, and the test shows it is true against a real plaintext gRPC receiver."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc  # type: ignore[import-untyped]
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

import instrumentation as tw
from instrumentation._stats import STATS

WARNING = "has no http:// or https:// scheme"


class _Traces(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.spans = 0

    def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 - the name gRPC calls
        self.spans += sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
        return trace_service_pb2.ExportTraceServiceResponse()


@pytest.fixture
def plaintext_receiver() -> Iterator[tuple[int, _Traces]]:
    """A plaintext OTLP/gRPC receiver on a loopback port, as `toolwatch serve --grpc-port` and the Collector run."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    traces = _Traces()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(traces, server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield port, traces
    server.stop(None)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_INSECURE",
                 "OTEL_EXPORTER_OTLP_TRACES_INSECURE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")  # seconds: a refused handshake gives up soon


@tw.tool
def ping(x: int) -> int:
    return x


def _export_three(caplog: pytest.LogCaptureFixture, **configure: Any) -> tuple[str, int]:
    """What configure() warned of, and the spans the exporter got through."""
    STATS.reset()
    with caplog.at_level(logging.WARNING, logger="instrumentation"):
        provider = tw.configure(exporter="otlp-grpc", service_name="grpc-endpoint", set_global=False, **configure)
    warned = caplog.text
    caplog.clear()
    try:
        for i in range(3):
            ping(i)
        provider.force_flush(5_000)
    finally:
        tw.shutdown(timeout_millis=2_000)
    return warned, tw.telemetry_stats().spans_exported


def test_an_endpoint_without_a_scheme_is_warned_of_and_fails_against_plaintext(
    plaintext_receiver: tuple[int, _Traces], caplog: pytest.LogCaptureFixture
) -> None:
    port, traces = plaintext_receiver
    warned, exported = _export_three(caplog, endpoint=f"127.0.0.1:{port}")
    assert WARNING in warned
    assert f"write 'http://127.0.0.1:{port}' for plaintext" in warned
    assert exported == 0 and traces.spans == 0  # TLS against plaintext: nothing arrives, as the warning says


@pytest.mark.parametrize("how", ["http scheme", "insecure variable", "traces insecure variable", "from environment"])
def test_a_plaintext_endpoint_is_not_warned_of_and_arrives(
    how: str, plaintext_receiver: tuple[int, _Traces], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    port, traces = plaintext_receiver
    endpoint: str | None = f"127.0.0.1:{port}"
    if how == "http scheme":
        endpoint = f"http://127.0.0.1:{port}"
    elif how == "insecure variable":
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
    elif how == "traces insecure variable":
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_INSECURE", "true")
    else:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"http://127.0.0.1:{port}")
        endpoint = None
    warned, exported = _export_three(caplog, endpoint=endpoint)
    assert WARNING not in warned
    assert exported == 3 and traces.spans == 3


def test_an_endpoint_without_a_scheme_from_the_environment_is_warned_of(
    plaintext_receiver: tuple[int, _Traces], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    port, traces = plaintext_receiver
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"localhost:{port}")
    warned, exported = _export_three(caplog)
    assert f"endpoint 'localhost:{port}' has no http:// or https:// scheme" in warned
    assert exported == 0 and traces.spans == 0
