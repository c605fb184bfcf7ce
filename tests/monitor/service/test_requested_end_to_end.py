"""Requested calls end to end: real SDK spans over the real OTLP/HTTP exporter into `toolwatch serve`, exact metric
values; then `toolwatch replay` of the same spans gives the same figures."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import Tracer

from tests.monitor.service.conftest import RULES, ServeFactory, scrape, value, wait_for
from tests.monitor.service.spans import new_tracer, replay_counts
from tests.monitor.service.test_requested_calls import Req, chat, ran

A = "incident-triage"
AUTH, BILL, FULF, RISK, SUPP = (
    "pull_auth_telemetry",
    "pull_billing_telemetry",
    "pull_fulfillment_telemetry",
    "pull_risk_telemetry",
    "pull_support_telemetry",
)


def _turn(tracer: Tracer, text: str, build: list[tuple[str, object]]) -> None:
    msgs = json.dumps([{"role": "user", "parts": [{"type": "text", "content": text}]}])
    answer = json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "Result: looked at it"}]}])
    attrs = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": A,
        "gen_ai.input.messages": msgs,
        "gen_ai.output.messages": answer,
    }
    with tracer.start_as_current_span(f"invoke_agent {A}", attributes=attrs):
        for kind, what in build:
            if kind == "chat":
                assert isinstance(what, Req)
                chat(tracer, what)
            elif kind == "bad":
                assert isinstance(what, str)
                chat(tracer, output=what)
            else:
                assert isinstance(what, tuple)
                ran(tracer, *what)
        chat(tracer)  # the final answer


def _spans() -> list[ReadableSpan]:
    x = {"log_excerpt": "x"}
    provider, tracer, memory = new_tracer()
    # Instrumented at the model layer only: the requested call is the turn's call (correct).
    # (and one more model request whose output cannot be read: ignored and counted, the turn judged all the same)
    _turn(tracer, "[AUTH] login failure", [("chat", Req(AUTH, "call_a", x)), ("bad", '[{"parts":[{"type":"tool_call"')])
    # A requested tool that does not exist, which the framework refused: hallucinated, and the risk call missed.
    _turn(tracer, "[RISK] score spike", [("chat", Req("pull_risk_telemtry", "call_r", x))])
    # Requested and run, the same call id: one call (not a spurious second one).
    _turn(tracer, "[FULF] parcel stuck", [("chat", Req(FULF, "call_f", x)), ("ran", (FULF, "call_f", x))])
    # Requested, and run by a wrapper that recorded no call id: one call.
    _turn(tracer, "[SUPP] ticket backlog", [("chat", Req(SUPP, "call_s", x)), ("ran", (SUPP, None, x))])
    # Requested twice, run once (an iteration cap): the second is an extra call.
    _turn(
        tracer,
        "[BILL] refund blocked",
        [("chat", Req(BILL, "b1", x)), ("ran", (BILL, "b1", x)), ("chat", Req(BILL, "b2", x))],
    )
    provider.shutdown()
    return list(memory.get_finished_spans())


def _expected() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    def k(name: str, **labels: str) -> tuple[str, tuple[tuple[str, str], ...]]:
        return name, tuple(sorted({"agent": A, **labels}.items()))

    calls = "toolwatch_tool_calls_total"
    return {
        k(calls, tool=AUTH, outcome="correct"): 1,
        k(calls, tool=FULF, outcome="correct"): 1,
        k(calls, tool=FULF, outcome="spurious"): 0,
        k(calls, tool=SUPP, outcome="correct"): 1,
        k(calls, tool=SUPP, outcome="spurious"): 0,
        k(calls, tool=BILL, outcome="correct"): 1,
        k(calls, tool=BILL, outcome="spurious"): 1,
        k(calls, tool="__other__", outcome="hallucinated"): 1,
        k("toolwatch_judged_calls_total", tool=AUTH): 1,
        k("toolwatch_judged_calls_total", tool=FULF): 1,
        k("toolwatch_judged_calls_total", tool=BILL): 2,
        k("toolwatch_judged_calls_total", tool="__other__"): 1,
        k("toolwatch_missed_calls_total", tool=RISK): 1,
        k("toolwatch_missed_calls_total", tool=AUTH): 0,
        k("toolwatch_turns_total", judged="true"): 5,
        k("toolwatch_turns_with_calls_total"): 5,
        k("toolwatch_turn_checks_total", check="selection", result="pass"): 3,
        k("toolwatch_turn_checks_total", check="selection", result="fail"): 2,
        ("toolwatch_span_attributes_ignored_total", (("attribute", "gen_ai.output.messages"),)): 1,
    }


def test_requested_calls_are_judged_by_serve_and_replay_alike(serve: ServeFactory, tmp_path: Path) -> None:
    spans: Sequence[ReadableSpan] = _spans()
    log = tmp_path / "verdicts.jsonl"
    _, server = serve(verdict_log=str(log))
    exporter = OTLPSpanExporter(endpoint=server.endpoint, timeout=10)
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    wait_for(lambda: server.pipeline.turns_judged == 5)
    samples = scrape(server)
    expected = _expected()
    assert {key: value(samples, key[0], **dict(key[1])) or 0 for key in expected} == expected

    server.pipeline.verdict_log.flush()  # type: ignore[union-attr]
    reasons = {r["input"]: r["reason"] for r in map(json.loads, log.read_text().splitlines())}
    assert reasons == {  # the failed turns; the calls requested and never run are named when some call ran
        "[RISK] score spike": "failed (risk): missed pull_risk_telemetry; unknown tool 'pull_risk_telemtry'",
        "[BILL] refund blocked": f"failed (billing): extra call {BILL}; requested, not run: {BILL}",
    }

    assert replay_counts(tmp_path, spans, RULES) == {
        "turns": 5,
        "judged_turns": 5,
        "judged_calls": 6,
        "correct": 4,
        "spurious": 1,
        "hallucinated": 1,
        "missed": 1,
        "expected_calls": 5,
    }
