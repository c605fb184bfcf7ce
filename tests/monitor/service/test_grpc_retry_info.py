"""OTLP/gRPC throttling: a full queue is answered UNAVAILABLE with a `google.rpc.RetryInfo` carrying the delay
(--retry-after), as the OTLP specification asks, so exporters wait that long instead of their own backoff."""

from __future__ import annotations

import threading
import time

import grpc  # type: ignore[import-untyped]
from google.rpc import code_pb2, error_details_pb2, status_pb2  # type: ignore[import-untyped]
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from monitor.serve import Server
from monitor.serve._grpc import SERVICE
from tests.monitor.service.conftest import ServeFactory, scrape, value, wait_for
from tests.monitor.service.spans import Call, TurnSpec, record_turns, to_request


def _turns(n: int, tag: str) -> list[TurnSpec]:
    return [TurnSpec(f"look up {tag} {i}", [Call("pull_auth_telemetry")]) for i in range(n)]


def _full(serve: ServeFactory, retry_after_s: int) -> Server:
    """A server whose queue (2 spans) is full and stays so until `server.pipeline.paused` is cleared."""
    _, server = serve(grpc_port=0, queue_spans=2, retry_after_s=retry_after_s)
    server.pipeline.paused = True
    exporter = GrpcExporter(endpoint=f"127.0.0.1:{server.grpc_port}", insecure=True, timeout=5)
    assert exporter.export(record_turns(_turns(1, "first"))) is SpanExportResult.SUCCESS
    exporter.shutdown()
    return server


def _unavailable(server: Server) -> float:
    return value(scrape(server), "toolwatch_requests_total", transport="grpc", code="14") or 0.0


def test_a_full_queue_answers_unavailable_with_retry_info(serve: ServeFactory) -> None:
    server = _full(serve, retry_after_s=3)
    body = to_request(record_turns(_turns(1, "second"))).SerializeToString()
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        export = channel.unary_unary(f"/{SERVICE}/Export")
        try:
            export(body, timeout=5)
            raise AssertionError("a full queue accepted the request")
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.UNAVAILABLE
            trailers = dict(err.trailing_metadata())
    # The standard place: google.rpc.Status in grpc-status-details-bin, its details holding a RetryInfo.
    status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
    assert status.code == code_pb2.UNAVAILABLE and status.message == "queue full, retry later"
    infos = [d for d in status.details if d.Is(error_details_pb2.RetryInfo.DESCRIPTOR)]
    assert len(infos) == 1
    info = error_details_pb2.RetryInfo()
    infos[0].Unpack(info)
    assert info.retry_delay.ToTimedelta().total_seconds() == 3
    # And where OpenTelemetry's Python exporter reads it.
    alone = error_details_pb2.RetryInfo.FromString(trailers["google.rpc.retryinfo-bin"])
    assert alone == info


def test_the_otel_grpc_exporter_waits_the_delay_it_is_given(serve: ServeFactory) -> None:
    # Before: no RetryInfo, so the exporter retried after its own first backoff, 1 s +-20%, whatever --retry-after said.
    server = _full(serve, retry_after_s=2)
    exporter = GrpcExporter(endpoint=f"127.0.0.1:{server.grpc_port}", insecure=True, timeout=10)
    rejected_at: list[float] = []

    def drain_after_the_first_refusal() -> None:
        wait_for(lambda: _unavailable(server) == 1, timeout=5)
        rejected_at.append(time.monotonic())
        server.pipeline.paused = False
        wait_for(lambda: server.pipeline.queued == 0, timeout=5)

    drainer = threading.Thread(target=drain_after_the_first_refusal)
    drainer.start()
    try:
        assert exporter.export(record_turns(_turns(1, "second"))) is SpanExportResult.SUCCESS
        done = time.monotonic()
    finally:
        drainer.join()
        exporter.shutdown()
    assert _unavailable(server) == 1  # one refusal, then the retry went through
    assert done - rejected_at[0] >= 1.7  # the 2 s asked for (less the time to see the refusal), not 0.8 to 1.2 s
    assert done - rejected_at[0] < 4
