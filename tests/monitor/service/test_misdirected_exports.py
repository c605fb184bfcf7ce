"""Exporters pointed at the receiver the wrong way, as a new user's first configuration often is: real OTLP exporters
against a real `serve`. The exporter only logs "404 Not Found" (or a failed HTTP/2 handshake), so the server's log
must say what was wrong and what to set instead."""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request

import pytest
from google.rpc import code_pb2, status_pb2  # type: ignore[import-untyped]
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.monitor.service.conftest import ServeFactory, scrape, value
from tests.monitor.service.http_util import post
from tests.monitor.service.test_bad_input import JS, PB, assert_still_serving, good_pb


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


def _status(body: bytes, ctype: str) -> tuple[int, str]:
    """A google.rpc.Status answer's (code, message), read in its content type."""
    if ctype == JS:
        doc = json.loads(body)
        return doc["code"], doc["message"]
    st = status_pb2.Status.FromString(body)
    return st.code, st.message


TYPES = [(PB, PB, "http_protobuf"), ("application/protobuf", "application/protobuf", "http_protobuf"),
         (JS, JS, "http_json"), ("text/plain", PB, "http_other")]  # fmt: skip


@pytest.mark.parametrize(("ctype", "reply", "transport"), TYPES)
def test_a_wrong_path_is_answered_a_status_saying_where_traces_go(
    serve: ServeFactory, ctype: str, reply: str, transport: str
) -> None:
    # OTLP/HTTP: an error's body is a google.rpc.Status in the request's content type (protobuf, its default, for
    # another). The router's own 404 was "404: Not Found" in text/plain, which an exporter cannot read.
    _, server = serve()
    base = server.endpoint.removesuffix("/v1/traces")
    for path, hint in [("/", "no such path '/'"), ("/v1/metrics", "traces only"), ("/v1/traces/", "no such path")]:
        status, body, headers = post(base + path, good_pb(), ctype)
        assert (status, headers["Content-Type"]) == (404, reply), (path, body)
        code, message = _status(body, reply)
        assert code == code_pb2.NOT_FOUND and hint in message, message
        assert "POST /v1/traces" in message and f"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT={server.endpoint}" in message
    assert value(scrape(server), "toolwatch_requests_total", transport=transport, code="404") == 3  # as before
    assert_still_serving(server)


def _call(url: str, method: str, ctype: str | None) -> tuple[int, bytes, dict[str, str]]:
    headers = {"Content-Type": ctype} if ctype else {}
    req = urllib.request.Request(url, data=b"{}" if ctype else None, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read(), dict(resp.headers.items())
    except urllib.error.HTTPError as err:
        return err.code, err.read(), dict(err.headers.items())


@pytest.mark.parametrize(
    ("method", "ctype", "reply", "transport"),
    [("GET", None, PB, "http_other"), ("PUT", JS, JS, "http_json"), ("DELETE", PB, PB, "http_protobuf")],
)
def test_another_method_is_answered_405_with_a_status_saying_post(
    serve: ServeFactory, method: str, ctype: str | None, reply: str, transport: str
) -> None:
    _, server = serve()
    status, body, headers = _call(server.endpoint, method, ctype)
    assert (status, headers["Content-Type"], headers["Allow"]) == (405, reply, "POST"), body
    code, message = _status(body, reply)
    assert code == code_pb2.UNIMPLEMENTED and f"method {method!r}" in message and "POST /v1/traces" in message
    status, _, headers = _call(server.endpoint, "HEAD", None)  # the same head, no body
    assert (status, headers["Content-Type"], headers["Allow"]) == (405, PB, "POST")
    s = scrape(server)
    assert value(s, "toolwatch_requests_total", transport=transport, code="405") == 1 + (transport == "http_other")
    assert_still_serving(server)
