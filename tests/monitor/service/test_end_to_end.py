"""Real SDK spans through the real OTLP exporters into `serve`: exact metric values for known turns."""

from __future__ import annotations

import gzip
import json
import urllib.request
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import SpanKind

from monitor.otlp import read_jsonl, request_to_json
from tests.monitor.service.conftest import Samples, ServeFactory, scrape, value, wait_for
from tests.monitor.service.spans import Call, TurnSpec, new_tracer, record_turns, to_request

A = "incident-triage"
AUTH, BILL, FULF, RISK, SUPP = (
    "pull_auth_telemetry",
    "pull_billing_telemetry",
    "pull_fulfillment_telemetry",
    "pull_risk_telemetry",
    "pull_support_telemetry",
)
OK = "Result: looked at it"


def _args(line: str) -> dict[str, str]:
    return {"log_excerpt": line}


def known_turns() -> list[TurnSpec]:
    auth = [
        TurnSpec(f"[AUTH] login failure {i}", [Call(AUTH, _args("login failure"))], output_text=OK) for i in range(6)
    ]
    return auth + [
        # wrong tool: drawn to the tag inside the body
        TurnSpec("[BILL] refund blocked after [AUTH] token expiry", [Call(AUTH, _args("token"))], output_text=OK),
        # a double call: one correct, one spurious
        TurnSpec("[FULF] parcel stuck", [Call(FULF, _args("parcel")), Call(FULF, _args("parcel"))], output_text=OK),
        # a made-up tool name: hallucinated, and the risk call is missed
        TurnSpec("[RISK] score spike", [Call("pull_risk_telemtry", _args("score"))], output_text=OK),
        # skipped call: missed
        TurnSpec("[SUPP] ticket backlog", [], output_text=OK),
        # no rule matches: unjudged turn, unjudged call
        TurnSpec("hello there", [Call(AUTH, _args("hello"))], output_text=OK),
        # malformed argument JSON on a correct call: schema violation, end-to-end fails
        TurnSpec("[AUTH] mfa timeout", [Call(AUTH, '{"log_excerpt": "mfa')], output_text=OK),
    ]


def check_known_metrics(s: Samples) -> None:

    def v(name: str, **labels: str) -> float | None:
        return value(s, name, **labels)

    assert v("toolwatch_tool_calls_total", agent=A, tool=AUTH, outcome="correct") == 7
    assert v("toolwatch_tool_calls_total", agent=A, tool=AUTH, outcome="wrong_tool") == 1
    assert v("toolwatch_tool_calls_total", agent=A, tool=AUTH, outcome="unjudged") == 1
    assert v("toolwatch_tool_calls_total", agent=A, tool=FULF, outcome="correct") == 1
    assert v("toolwatch_tool_calls_total", agent=A, tool=FULF, outcome="spurious") == 1
    assert v("toolwatch_tool_calls_total", agent=A, tool="__other__", outcome="hallucinated") == 1
    assert v("toolwatch_judged_calls_total", agent=A, tool=AUTH) == 8
    assert v("toolwatch_judged_calls_total", agent=A, tool=FULF) == 2
    assert v("toolwatch_judged_calls_total", agent=A, tool="__other__") == 1
    assert v("toolwatch_missed_calls_total", agent=A, tool=BILL) == 1
    assert v("toolwatch_missed_calls_total", agent=A, tool=RISK) == 1
    assert v("toolwatch_missed_calls_total", agent=A, tool=SUPP) == 1
    assert v("toolwatch_expected_calls_total", agent=A, tool=AUTH) == 7
    assert v("toolwatch_expected_calls_total", agent=A, tool=SUPP) == 1
    assert v("toolwatch_turns_total", agent=A, judged="true") == 11
    assert v("toolwatch_turns_total", agent=A, judged="false") == 1
    assert v("toolwatch_turns_with_calls_total", agent=A) == 11
    assert v("toolwatch_turn_checks_total", agent=A, check="selection", result="pass") == 7
    assert v("toolwatch_turn_checks_total", agent=A, check="selection", result="fail") == 4
    assert v("toolwatch_turn_checks_total", agent=A, check="end_to_end", result="pass") == 6
    assert v("toolwatch_turn_checks_total", agent=A, check="response", result="pass") == 11
    assert v("toolwatch_schema_violations_total", agent=A, tool=AUTH, kind="malformed") == 1
    assert v("toolwatch_schema_checked_calls_total", agent=A, tool=AUTH) == 9
    assert v("toolwatch_schema_invalid_calls_total", agent=A, tool=AUTH) == 1
    # Schema adherence's and argument correctness's numerators are counters of their own (a difference of two
    # counters is not one in Prometheus' increase()): the valid calls, the correct calls whose argument checks pass.
    assert v("toolwatch_schema_valid_calls_total", agent=A, tool=AUTH) == 8
    assert v("toolwatch_schema_valid_calls_total", agent=A, tool=FULF) == 2
    assert v("toolwatch_schema_valid_calls_total", agent=A, tool=BILL) == 0  # created at 0, never called
    assert v("toolwatch_argument_checked_calls_total", agent=A, tool=AUTH) == 7
    assert v("toolwatch_argument_ok_calls_total", agent=A, tool=AUTH) == 6  # not the malformed one
    assert v("toolwatch_argument_mismatches_total", agent=A, tool=AUTH) == 1
    assert v("toolwatch_argument_ok_calls_total", agent=A, tool=FULF) == 1
    assert v("toolwatch_argument_ok_calls_total", agent=A, tool=BILL) == 0
    assert v("toolwatch_confusion_total", agent=A, expected=AUTH, actual=AUTH) == 7
    assert v("toolwatch_confusion_total", agent=A, expected=BILL, actual=AUTH) == 1
    assert v("toolwatch_confusion_total", agent=A, expected="(none)", actual=FULF) == 1
    assert v("toolwatch_confusion_total", agent=A, expected=RISK, actual="(unknown)") == 1
    assert v("toolwatch_confusion_total", agent=A, expected=SUPP, actual="(none)") == 1
    # 8 correct of 11 judged calls; 1 spurious; 3 missed of 11 expected; 7 of 11 turns selection-ok.
    for window in ("5m", "1h"):
        assert v("toolwatch_tool_call_accuracy_ratio", agent=A, window=window) == pytest.approx(8 / 11)
        assert v("toolwatch_spurious_call_ratio", agent=A, window=window) == pytest.approx(1 / 11)
        assert v("toolwatch_missed_call_ratio", agent=A, window=window) == pytest.approx(3 / 11)
        assert v("toolwatch_selection_accuracy_ratio", agent=A, window=window) == pytest.approx(7 / 11)
        assert v("toolwatch_end_to_end_accuracy_ratio", agent=A, window=window) == pytest.approx(6 / 11)
        assert v("toolwatch_tool_accuracy_ratio", agent=A, tool=FULF, window=window) == pytest.approx(1 / 2)
        # a tool never judged has no ratio at all (zero denominator: absent, not 0)
        assert v("toolwatch_tool_accuracy_ratio", agent=A, tool=BILL, window=window) is None
        # Per tool, the spurious calls of the tool / its judged calls, and its missed / its expected calls.
        spurious = {AUTH: 0.0, FULF: 1 / 2, "__other__": 0.0}  # BILL, RISK, SUPP: never called in a judged turn
        missed = {AUTH: 0.0, BILL: 1.0, FULF: 0.0, RISK: 1.0, SUPP: 1.0}  # __other__: never expected
        for tool in (AUTH, BILL, FULF, RISK, SUPP, "__other__"):
            assert v("toolwatch_tool_spurious_call_ratio", agent=A, tool=tool, window=window) == spurious.get(tool)
            assert v("toolwatch_tool_missed_call_ratio", agent=A, tool=tool, window=window) == missed.get(tool)


N_TURNS = len(known_turns())


@pytest.mark.parametrize("compression", [Compression.NoCompression, Compression.Gzip, Compression.Deflate])
def test_http_protobuf_exporter_exact_metrics(serve: ServeFactory, compression: Compression) -> None:
    _, server = serve()
    spans = record_turns(known_turns())
    exporter = OTLPSpanExporter(endpoint=server.endpoint, compression=compression, timeout=10)
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    exporter.shutdown()  # type: ignore[no-untyped-call]
    wait_for(lambda: server.pipeline.turns_judged == N_TURNS)
    samples = scrape(server)
    check_known_metrics(samples)
    assert value(samples, "toolwatch_spans_received_total", transport="http_protobuf") == len(spans)
    assert value(samples, "toolwatch_requests_total", transport="http_protobuf", code="200") == 1


def _post(url: str, body: bytes, ctype: str, **headers: str) -> tuple[int, bytes, str]:
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": ctype, **headers})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read(), resp.headers.get("Content-Type", "")
    except urllib.error.HTTPError as err:
        return err.code, err.read(), err.headers.get("Content-Type", "")


def test_http_json_exact_metrics(serve: ServeFactory) -> None:
    _, server = serve()
    req = to_request(record_turns(known_turns()))
    body = request_to_json(req).encode()
    status, resp, ctype = _post(
        server.endpoint, gzip.compress(body), "application/json", **{"Content-Encoding": "gzip"}
    )
    assert (status, ctype, json.loads(resp)) == (200, "application/json", {})
    wait_for(lambda: server.pipeline.turns_judged == N_TURNS)
    check_known_metrics(scrape(server))


def test_collector_file_exporter_lines(serve: ServeFactory, tmp_path: Path) -> None:
    _, server = serve()
    # One export request per line, as the Collector's file exporter writes: here one turn per line.
    lines = [request_to_json(to_request(record_turns([t]))) for t in known_turns()]
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert sum(len(d.spans) for d in read_jsonl(path)) == sum(1 + len(t.calls) for t in known_turns())
    for line in path.read_text().splitlines():
        assert _post(server.endpoint, line.encode(), "application/json")[0] == 200
    wait_for(lambda: server.pipeline.turns_judged == N_TURNS)
    check_known_metrics(scrape(server))


def test_grpc_exporter_exact_metrics(serve: ServeFactory) -> None:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

    _, server = serve(grpc_port=0)
    assert server.grpc_port
    exporter = GrpcExporter(endpoint=f"127.0.0.1:{server.grpc_port}", insecure=True, timeout=10)
    assert exporter.export(record_turns(known_turns())) is SpanExportResult.SUCCESS
    exporter.shutdown()
    wait_for(lambda: server.pipeline.turns_judged == N_TURNS)
    samples = scrape(server)
    check_known_metrics(samples)
    assert value(samples, "toolwatch_requests_total", transport="grpc", code="0") == 1


def test_traces_of_other_spans_fill_the_bound_without_counting_evictions(serve: ServeFactory) -> None:
    # A Collector forwards everything: HTTP spans of 20 other requests (a trace each), then one agent turn, to a
    # monitor holding at most 5 pending traces. Making room drops traces of other spans only, which judges nothing:
    # no eviction is counted, and the turn is judged with its call.
    _, server = serve(max_pending=5)
    provider, tracer, exporter = new_tracer()
    for i in range(20):
        with tracer.start_as_current_span(f"GET /orders/{i}", kind=SpanKind.SERVER):
            pass
    provider.shutdown()
    spans = list(exporter.get_finished_spans())
    spans += record_turns([TurnSpec("[AUTH] login failure", [Call(AUTH, _args("login failure"))], output_text=OK)])
    otlp = OTLPSpanExporter(endpoint=server.endpoint, timeout=10)
    assert otlp.export(spans) is SpanExportResult.SUCCESS
    otlp.shutdown()  # type: ignore[no-untyped-call]
    wait_for(lambda: server.pipeline.turns_judged == 1)
    samples = scrape(server)
    assert value(samples, "toolwatch_turns_evicted_total") == 0
    assert value(samples, "toolwatch_tool_calls_total", agent=A, tool=AUTH, outcome="correct") == 1
