"""OTLP/gRPC refuses what OTLP/HTTP refuses, in the same order and counted the same way: the token is checked before
the message is read (as HTTP checks it on the head, before the body), and a message over --max-decompressed-bytes,
refused by gRPC core itself, is still counted in toolwatch_requests_total (as HTTP counts its 413)."""

from __future__ import annotations

from typing import Any

import grpc  # type: ignore[import-untyped]
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace.export import SpanExportResult

from monitor.serve import Server
from monitor.serve._grpc import SERVICE
from tests.monitor.service.conftest import Samples, ServeFactory, scrape, value, wait_for
from tests.monitor.service.http_util import post
from tests.monitor.service.spans import Call, TurnSpec, record_turns, to_request

LIMIT = 100_000


def _big() -> bytes:
    """An export request of one turn, padded past LIMIT bytes (and far less once gzipped)."""
    req = to_request(record_turns([TurnSpec("look up tag", [Call("pull_auth_telemetry")])]))
    req.resource_spans[0].scope_spans[0].spans[0].attributes.add(key="pad").value.string_value = "a" * (2 * LIMIT)
    return bytes(req.SerializeToString())


def _code(port: int, body: bytes, compression: grpc.Compression, token: str | None = None) -> grpc.StatusCode:
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            channel.unary_unary(f"/{SERVICE}/Export")(body, timeout=10, metadata=metadata, compression=compression)
        except grpc.RpcError as err:
            return err.code()
    return grpc.StatusCode.OK


def _refused_for_size(server: Server, count: int) -> Samples:
    """The scrape once the handler has counted `count` messages that gRPC core refused for their size. Core sends
    RESOURCE_EXHAUSTED itself, before the handler is told there is no message and counts it: the client can see the
    status before the count lands."""
    wait_for(lambda: value(scrape(server), "toolwatch_requests_total", transport="grpc", code="8") == count, timeout=5)
    return scrape(server)


CODINGS = pytest.mark.parametrize(
    "compression", [grpc.Compression.NoCompression, grpc.Compression.Gzip], ids=["plain", "gzip"]
)


@CODINGS
def test_a_wrong_token_is_refused_before_the_message_is_read(serve: ServeFactory, compression: Any) -> None:
    # Before: gRPC core read the whole message first, and refused it for its size; an unauthenticated client had the
    # server take up to --max-decompressed-bytes per request. OTLP/HTTP answers the same request 401.
    _, server = serve(grpc_port=0, token="t0k", max_decompressed_bytes=LIMIT, max_body_bytes=LIMIT)
    port = server.grpc_port
    assert port
    assert post(server.endpoint, _big(), "application/x-protobuf")[0] == 401
    assert _code(port, _big(), compression) == grpc.StatusCode.UNAUTHENTICATED
    assert _code(port, _big(), compression, token="wrong") == grpc.StatusCode.UNAUTHENTICATED
    assert _code(port, _big(), compression, token="t0k") == grpc.StatusCode.RESOURCE_EXHAUSTED
    s = _refused_for_size(server, 1)
    assert value(s, "toolwatch_requests_total", transport="http_protobuf", code="401") == 1
    assert value(s, "toolwatch_requests_total", transport="grpc", code="16") == 2
    assert value(s, "toolwatch_requests_total", transport="grpc", code="8") == 1


def test_a_message_past_the_decompressed_limit_is_counted(serve: ServeFactory) -> None:
    _, server = serve(grpc_port=0, max_decompressed_bytes=LIMIT, max_body_bytes=LIMIT)
    port = server.grpc_port
    assert port
    assert _code(port, _big(), grpc.Compression.NoCompression) == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert _code(port, _big(), grpc.Compression.Gzip) == grpc.StatusCode.RESOURCE_EXHAUSTED
    # The real exporter, gzip: a small message goes through, and the server is still serving after the refusals.
    exporter = GrpcExporter(
        endpoint=f"127.0.0.1:{port}", insecure=True, timeout=10, compression=grpc.Compression.Gzip
    )
    assert exporter.export(record_turns([TurnSpec("look up tag", [Call("pull_auth_telemetry")])])) is (
        SpanExportResult.SUCCESS
    )
    exporter.shutdown()
    wait_for(lambda: server.pipeline.turns_judged == 1, timeout=5)
    s = _refused_for_size(server, 2)
    assert value(s, "toolwatch_requests_total", transport="grpc", code="8") == 2  # as HTTP counts its 413s
    assert value(s, "toolwatch_requests_total", transport="grpc", code="0") == 1
    assert value(s, "toolwatch_spans_received_total", transport="grpc") == 2


def test_bounds_past_what_grpc_takes_serve_grpc_at_its_own_limits(serve: ServeFactory) -> None:
    """gRPC core reads its options as C ints (at most 2**31 - 1): a larger --max-decompressed-bytes, --max-connections
    or --read-timeout (in ms) is served over HTTP as given and over gRPC at that limit, instead of failing at start."""
    _, server = serve(
        grpc_port=0, max_decompressed_bytes=4 * 2**30, max_connections=2**31, read_timeout_s=3650 * 86400
    )
    assert server.grpc_port
    options = dict(server._grpc.options())
    assert options["grpc.max_receive_message_length"] == 2**31 - 1
    assert options["grpc.max_allowed_incoming_connections"] == 2**31 - 2  # core aborts the process at 2**31 - 1
    assert options["grpc.max_connection_idle_ms"] == 2**31 - 1
    exporter = GrpcExporter(endpoint=f"127.0.0.1:{server.grpc_port}", insecure=True, timeout=10)
    assert exporter.export(record_turns([TurnSpec("look up tag", [Call("pull_auth_telemetry")])])) is (
        SpanExportResult.SUCCESS
    )
    exporter.shutdown()
    wait_for(lambda: server.pipeline.turns_judged == 1, timeout=5)


def _counts(server: Server, transport: str) -> dict[str, float | None]:
    s = scrape(server)
    out = {"received": value(s, "toolwatch_spans_received_total", transport=transport)}
    for reason in ("invalid_id", "malformed_span", "missing_tool_name"):
        out[reason] = value(s, "toolwatch_spans_rejected_total", reason=reason)
    return out


def test_grpc_answers_and_counts_unusable_spans_as_http_does(serve: ServeFactory) -> None:
    # The same request, one span with an id of the wrong length and one call without a tool name, to two servers.
    req = to_request(record_turns([TurnSpec("look up tag", [Call("pull_auth_telemetry"), Call("")])]))
    req.resource_spans[0].scope_spans[0].spans[0].span_id = b"\x01"
    body = bytes(req.SerializeToString())
    _, over_http = serve()
    status, http_body, _ = post(over_http.endpoint, body, "application/x-protobuf")
    assert status == 200
    _, over_grpc = serve(grpc_port=0)
    with grpc.insecure_channel(f"127.0.0.1:{over_grpc.grpc_port}") as channel:
        grpc_body = channel.unary_unary(f"/{SERVICE}/Export")(body, timeout=10)
    http_ps = ExportTraceServiceResponse.FromString(http_body).partial_success
    grpc_ps = ExportTraceServiceResponse.FromString(grpc_body).partial_success
    assert http_ps.rejected_spans == 2 and "invalid_id=1" in http_ps.error_message
    assert grpc_ps == http_ps
    assert _counts(over_grpc, "grpc") == _counts(over_http, "http_protobuf")
    assert _counts(over_grpc, "grpc")["received"] == len(req.resource_spans[0].scope_spans[0].spans)


def test_a_call_of_another_method_is_unimplemented_and_counted(serve: ServeFactory) -> None:
    # As OTLP/HTTP counts its 404 for another path (a metrics or logs exporter pointed at a traces-only receiver).
    _, server = serve(grpc_port=0)
    body = to_request(record_turns([TurnSpec("look up tag", [Call("pull_auth_telemetry")])])).SerializeToString()
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        for method in ("/opentelemetry.proto.collector.metrics.v1.MetricsService/Export", f"/{SERVICE}/Other"):
            with pytest.raises(grpc.RpcError) as err:
                channel.unary_unary(method)(body, timeout=10)
            assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert post(server.endpoint.replace("/v1/traces", "/v1/metrics"), body, "application/x-protobuf")[0] == 404
    s = scrape(server)
    assert value(s, "toolwatch_requests_total", transport="http_protobuf", code="404") == 1
    assert value(s, "toolwatch_requests_total", transport="grpc", code="12") == 2
    assert value(s, "toolwatch_spans_received_total", transport="grpc") == 0


def _dropped(server: Server) -> float | None:
    return value(scrape(server), "toolwatch_spans_dropped_total", reason="queue_full")


def test_a_queue_past_its_capacity_refuses_before_the_message_as_http_does(serve: ServeFactory) -> None:
    # One request larger than the queue is taken when the queue is empty: the queue is then past its capacity, and
    # OTLP/HTTP refuses the next request on its head (503, its body unread, no span counted as dropped). OTLP/gRPC
    # refused it only once its message was read and decoded, and counted its spans as dropped.
    first = to_request(record_turns([TurnSpec("look up tag", [Call("pull_auth_telemetry")] * 3)])).SerializeToString()
    second = to_request(record_turns([TurnSpec("look up tag 2", [Call("pull_auth_telemetry")])])).SerializeToString()
    dropped = {}
    for transport in ("http", "grpc"):
        _, server = serve(grpc_port=0, queue_spans=2)
        server.pipeline.paused = True
        port = server.grpc_port
        assert port
        assert _code(port, first, grpc.Compression.NoCompression) == grpc.StatusCode.OK
        assert server.pipeline.full()
        if transport == "http":
            assert post(server.endpoint, second, "application/x-protobuf")[0] == 503
        else:
            assert _code(port, second, grpc.Compression.NoCompression) == grpc.StatusCode.UNAVAILABLE
        dropped[transport] = _dropped(server)
    assert dropped == {"http": 0, "grpc": 0}
