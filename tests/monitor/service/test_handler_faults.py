"""A fault of the receiver's own code while it handles an export request (an exception no input is meant to cause:
a bug of ours, memory running out) is answered 503 + Retry-After, which OTLP exporters retry, with the traceback
logged and the answer counted; aiohttp's own answer was a text/plain 500, which exporters do not retry: the batch was
lost, counted nowhere.

No real input makes the handler raise (that is the point): the fault is injected into the pipeline's `offer`, the
last step of the handler, on the server's own loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import pytest
from google.rpc import code_pb2, status_pb2  # type: ignore[import-untyped]
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from monitor.otlp import request_to_json
from monitor.serve import Server, ServerThread
from tests.monitor.service.conftest import ServeFactory, scrape, value, wait_for
from tests.monitor.service.http_util import post
from tests.monitor.service.spans import Call, TurnSpec, record_turns, to_request

TOOL = "pull_auth_telemetry"


def _turns() -> list[TurnSpec]:
    return [TurnSpec(f"[AUTH] login failure {i}", [Call(TOOL, {"log_excerpt": "x"})]) for i in range(3)]


def _inject(st: ServerThread, server: Server, faults: int) -> Callable[[], int]:
    """The next `faults` calls of the pipeline's `offer` raise (then it works again); returns how many did."""
    pipeline = server.pipeline
    offer = pipeline.offer
    raised = 0

    def faulty(records: list[object]) -> bool:
        nonlocal raised
        if raised < faults:
            raised += 1
            raise RuntimeError(f"injected fault {raised}")
        return offer(records)  # type: ignore[arg-type]

    st.call(lambda: setattr(pipeline, "offer", faulty))
    return lambda: raised


def test_a_fault_while_handling_an_export_is_answered_503_and_the_exporter_sends_the_batch_again(
    serve: ServeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    st, server = serve(retry_after_s=1)
    raised = _inject(st, server, faults=1)
    spans = record_turns(_turns())
    exporter = OTLPSpanExporter(endpoint=server.endpoint, timeout=15)
    with caplog.at_level(logging.ERROR):
        assert exporter.export(spans) is SpanExportResult.SUCCESS  # its 2nd attempt
    exporter.shutdown()  # type: ignore[no-untyped-call]
    assert raised() == 1
    wait_for(lambda: server.pipeline.turns_judged == 3)
    samples = scrape(server)
    assert value(samples, "toolwatch_spans_received_total", transport="http_protobuf") == len(spans)
    assert value(samples, "toolwatch_requests_total", transport="http_protobuf", code="503") == 1
    assert value(samples, "toolwatch_requests_total", transport="http_protobuf", code="200") == 1
    assert value(samples, "toolwatch_requests_total", transport="http_protobuf", code="500") is None
    # told apart from the 503s of back-pressure (ToolwatchBackPressure): a fault is a bug to report
    assert value(samples, "toolwatch_receiver_faults_total", transport="http_protobuf") == 1
    assert value(samples, "toolwatch_receiver_faults_total", transport="http_json") == 0  # from the start
    faults = [r for r in caplog.records if "RuntimeError: injected fault 1" in r.getMessage()]
    assert len(faults) == 1 and "answered 503" in faults[0].getMessage(), [r.getMessage() for r in caplog.records]


@pytest.mark.parametrize("ctype", ["application/x-protobuf", "application/json"])
def test_a_fault_every_time_is_answered_503_every_time_and_logged_at_the_1st_and_10th(
    serve: ServeFactory, caplog: pytest.LogCaptureFixture, ctype: str
) -> None:
    st, server = serve(retry_after_s=3)
    raised = _inject(st, server, faults=1000)
    request = to_request(record_turns(_turns()))
    body = request_to_json(request).encode() if ctype.endswith("json") else request.SerializeToString()
    with caplog.at_level(logging.ERROR):
        for _ in range(12):
            status, answer, headers = post(server.endpoint, body, ctype)
            assert status == 503, answer
            assert headers["Retry-After"] == "3" and headers["Content-Type"] == ctype
            assert headers.get("Connection", "").lower() == "close"
            if ctype.endswith("json"):
                assert b"UNAVAILABLE" not in answer and b'"code": 14' in answer
            else:
                got = status_pb2.Status.FromString(answer)
                assert got.code == code_pb2.UNAVAILABLE and "retry" in got.message
    assert raised() == 12
    transport = "http_json" if ctype.endswith("json") else "http_protobuf"
    samples = scrape(server)
    assert value(samples, "toolwatch_requests_total", transport=transport, code="503") == 12
    assert value(samples, "toolwatch_receiver_faults_total", transport=transport) == 12
    assert value(samples, "toolwatch_spans_received_total", transport=transport) == 0
    logged = [r for r in caplog.records if "injected fault" in r.getMessage()]  # the traceback, as bounded text
    assert [r.getMessage().splitlines()[-1] for r in logged] == [
        "RuntimeError: injected fault 1",
        "RuntimeError: injected fault 10",
    ]
    assert not [r for r in caplog.records if r.name.startswith("aiohttp")]


def test_a_fault_while_handling_a_grpc_export_is_unavailable_and_the_exporter_sends_the_batch_again(
    serve: ServeFactory, caplog: pytest.LogCaptureFixture
) -> None:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

    st, server = serve(grpc_port=0, retry_after_s=1)
    raised = _inject(st, server, faults=1)
    spans = record_turns(_turns())
    exporter = GrpcExporter(endpoint=f"127.0.0.1:{server.grpc_port}", insecure=True, timeout=15)
    with caplog.at_level(logging.ERROR):
        assert exporter.export(spans) is SpanExportResult.SUCCESS  # its 2nd attempt
    exporter.shutdown()
    assert raised() == 1
    wait_for(lambda: server.pipeline.turns_judged == 3)
    samples = scrape(server)
    assert value(samples, "toolwatch_spans_received_total", transport="grpc") == len(spans)
    assert value(samples, "toolwatch_requests_total", transport="grpc", code="14") == 1  # UNAVAILABLE
    assert value(samples, "toolwatch_requests_total", transport="grpc", code="0") == 1
    assert value(samples, "toolwatch_receiver_faults_total", transport="grpc") == 1
    assert value(samples, "toolwatch_receiver_faults_total", transport="http_protobuf") == 0
    faults = [r for r in caplog.records if "RuntimeError: injected fault 1" in r.getMessage()]
    assert len(faults) == 1 and "UNAVAILABLE" in faults[0].getMessage(), [r.getMessage() for r in caplog.records]


def _fault_in_answer(monkeypatch: pytest.MonkeyPatch, faults: int) -> Callable[[], int]:
    """The next `faults` answers built for an accepted OTLP/protobuf export raise: a fault *after* the batch was
    queued and counted (the serialized ExportTraceServiceResponse, what a MemoryError may hit)."""
    from monitor.serve import _grpc, _http

    build = _http.export_response
    raised = 0

    def faulty(n_rejected: int, message: str) -> bytes:
        nonlocal raised
        if raised < faults:
            raised += 1
            raise MemoryError(f"injected fault {raised}")
        return build(n_rejected, message)

    monkeypatch.setattr(_http, "export_response", faulty)
    monkeypatch.setattr(_grpc, "export_response", faulty)
    return lambda: raised


@pytest.mark.parametrize("transport", ["http_protobuf", "grpc"])
def test_a_fault_after_the_batch_was_queued_leaves_it_counted_and_judged_once(
    serve: ServeFactory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, transport: str
) -> None:
    """The fault's 503 (UNAVAILABLE) makes the exporter send the batch again: the attempt it answers must have left
    nothing done, or the batch is counted twice (received, answered 200 *and* 503) and its spans offered twice."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

    st, server = serve(grpc_port=0, retry_after_s=1)
    raised = _fault_in_answer(monkeypatch, faults=1)
    spans = record_turns(_turns())
    exporter: OTLPSpanExporter | GrpcExporter
    if transport == "grpc":
        exporter = GrpcExporter(endpoint=f"127.0.0.1:{server.grpc_port}", insecure=True, timeout=15)
    else:
        exporter = OTLPSpanExporter(endpoint=server.endpoint, timeout=15)
    with caplog.at_level(logging.ERROR):
        assert exporter.export(spans) is SpanExportResult.SUCCESS  # its 2nd attempt
    exporter.shutdown()
    assert raised() == 1
    wait_for(lambda: server.pipeline.turns_judged == 3)
    time.sleep(0.5)  # past the grace period: a copy of the batch would be judged by now
    samples = scrape(server)
    ok, unavailable = ("0", "14") if transport == "grpc" else ("200", "503")
    assert server.pipeline.turns_judged == 3
    assert value(samples, "toolwatch_spans_received_total", transport=transport) == len(spans)
    assert value(samples, "toolwatch_requests_total", transport=transport, code=unavailable) == 1
    assert value(samples, "toolwatch_requests_total", transport=transport, code=ok) == 1
    assert value(samples, "toolwatch_receiver_faults_total", transport=transport) == 1
    assert value(samples, "toolwatch_spans_dropped_total", reason="duplicate") in (None, 0)


def test_a_fault_in_queueing_leaves_the_ignored_attributes_of_the_batch_counted_once(serve: ServeFactory) -> None:
    """The normalizer counts the attributes it ignored as it reads the batch, before the batch is queued: a fault
    there (answered 503) must not leave them counted, or the exporter's retry counts them a second time."""
    from tests.monitor.service.spans import new_tracer

    st, server = serve(retry_after_s=1)
    raised = _inject(st, server, faults=1)
    provider, tracer, memory = new_tracer()
    with tracer.start_as_current_span(
        "invoke_agent bot",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "bot", "gen_ai.conversation.id": 7},
    ):
        pass
    provider.shutdown()
    exporter = OTLPSpanExporter(endpoint=server.endpoint, timeout=15)
    assert exporter.export(memory.get_finished_spans()) is SpanExportResult.SUCCESS  # its 2nd attempt
    exporter.shutdown()  # type: ignore[no-untyped-call]
    assert raised() == 1
    samples = scrape(server)
    assert value(samples, "toolwatch_span_attributes_ignored_total", attribute="gen_ai.conversation.id") == 1


def test_a_fault_while_checking_an_expect_continue_head_is_answered_503_before_the_body(
    serve: ServeFactory, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A fault of ours in the `Expect: 100-continue` handler (it checks the head before the body is sent) is
    answered as one in the request's handler is: aiohttp's own answer was a 500, which exporters do not retry."""
    import socket

    from monitor.serve._http import TracesHandler
    from tests.monitor.service.test_bad_input import PB, good_pb
    from tests.monitor.service.test_http_framing import _interim_or_final

    precheck = TracesHandler._precheck
    raised = 0

    def faulty(self: TracesHandler, *args: object) -> object:
        nonlocal raised
        if not raised:
            raised += 1
            raise RuntimeError("injected fault in the head's check")
        return precheck(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(TracesHandler, "_precheck", faulty)
    _, server = serve(retry_after_s=2)
    body = good_pb()
    head = (f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: {PB}\r\nContent-Length: {len(body)}\r\n"
            "Expect: 100-continue\r\n\r\n").encode()
    with caplog.at_level(logging.ERROR), socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(head)
        answer = _interim_or_final(sock)
    assert answer.startswith(b"HTTP/1.1 503 "), answer
    assert b"Retry-After: 2\r\n" in answer
    assert raised == 1
    assert post(server.endpoint, body, PB)[0] == 200  # the exporter's retry
    samples = scrape(server)
    assert value(samples, "toolwatch_requests_total", transport="http_protobuf", code="503") == 1
    assert value(samples, "toolwatch_requests_total", transport="http_protobuf", code="500") is None
    assert value(samples, "toolwatch_receiver_faults_total", transport="http_protobuf") == 1
    assert any("injected fault in the head's check" in r.getMessage() for r in caplog.records)
