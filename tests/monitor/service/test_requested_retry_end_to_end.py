"""Chat spans sent again end to end: real SDK spans over the real OTLP/HTTP exporter into `toolwatch serve`, the same
spans exported again (the same request body: what an exporter's retry sends). toolwatch_spans_dropped_total counts
spans: a chat span of three requested calls sent again is one duplicate, arriving after its turn was judged one late
call; the verdicts count each call once."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.monitor.service.conftest import Samples, ServeFactory, scrape, value, wait_for
from tests.monitor.service.spans import new_tracer
from tests.monitor.service.test_requested_calls import Req, agent_turn, chat, ran

A = "incident-triage"
AUTH, BILL = "pull_auth_telemetry", "pull_billing_telemetry"
RISK, SUPP = "pull_risk_telemetry", "pull_support_telemetry"
X = {"log_excerpt": "x"}
DROPPED = "toolwatch_spans_dropped_total"


def _record(turn: bool) -> list[ReadableSpan]:
    """A turn whose model asked for three calls (one expected, two extra), or a session of no turn whose model
    asked for three (judged alone)."""
    provider, tracer, memory = new_tracer()
    if turn:
        with agent_turn(tracer, "[AUTH] login failure", A):
            chat(tracer, Req(AUTH, "a1", X), Req(BILL, "b1", X), Req(RISK, "r1", X))
            chat(tracer)  # the final answer: no call
    else:
        with tracer.start_as_current_span("session"):
            chat(tracer, Req(AUTH, "a2", X), Req(BILL, "b2", X), Req(SUPP, "s2", X))
    provider.shutdown()
    return list(memory.get_finished_spans())


def _calls(samples: Samples) -> dict[tuple[str, str], float]:
    """toolwatch_tool_calls_total by (tool, outcome), whatever the agent."""
    out: dict[tuple[str, str], float] = {}
    for (name, labels), v in samples.items():
        if name == "toolwatch_tool_calls_total" and v:
            d = dict(labels)
            out[(d["tool"], d["outcome"])] = out.get((d["tool"], d["outcome"]), 0) + v
    return out


def test_a_chat_span_sent_again_counts_once_as_a_duplicate(serve: ServeFactory) -> None:
    _, server = serve(grace_s=1.0, turnless_timeout_s=1.0)
    exporter = OTLPSpanExporter(endpoint=server.endpoint, timeout=10)
    turn, session = _record(turn=True), _record(turn=False)

    def export(spans: Sequence[ReadableSpan]) -> None:
        assert exporter.export(spans) is SpanExportResult.SUCCESS

    def dropped(reason: str) -> float:
        return value(scrape(server), DROPPED, reason=reason) or 0

    export(turn)
    export(turn)  # while the turn is pending: the turn span and the chat span of three calls, 2 duplicates
    wait_for(lambda: server.pipeline.turns_judged == 1)
    assert dropped("duplicate") == 2
    export(session)
    wait_for(lambda: server.pipeline.turns_judged == 2)  # its calls judged alone, at the turnless timeout
    export(session)  # a copy of calls judged alone: 1
    wait_for(lambda: dropped("duplicate") == 3)
    # After the turn was judged: the turn span and its chat span both duplicates (an exporter's retry; the chat span
    # was counted a late call, which ToolwatchSpansDropped reads as turns judged with calls missing).
    export(turn)
    wait_for(lambda: dropped("duplicate") == 5 and server.pipeline.assembler.pending_traces == 0)

    samples = scrape(server)
    assert {r: value(samples, DROPPED, reason=r) or 0 for r in ("duplicate", "late_call")} == {
        "duplicate": 5,
        "late_call": 0,
    }
    assert server.pipeline.turns_judged == 2
    assert _calls(samples) == {  # each call once
        (AUTH, "correct"): 1,
        (BILL, "spurious"): 1,
        (RISK, "spurious"): 1,
        (AUTH, "unjudged"): 1,
        (BILL, "unjudged"): 1,
        (SUPP, "unjudged"): 1,
    }


def test_a_chat_span_sent_again_after_its_call_ran_and_was_judged_is_a_duplicate(serve: ServeFactory) -> None:
    """BatchSpanProcessor sends a turn in several requests: here the turn span and the call that ran, then the chat
    span that asked for that call (reconciled away: the call that ran accounts for it). That second request sent again
    after the verdict (its response lost) is one duplicate: no call judged alone, no late call, no turn more."""
    _, server = serve(grace_s=3.0, turnless_timeout_s=1.0)
    exporter = OTLPSpanExporter(endpoint=server.endpoint, timeout=10)
    provider, tracer, memory = new_tracer()
    with agent_turn(tracer, "[AUTH] login failure", A):
        chat(tracer, Req(AUTH, "a1", X))
        ran(tracer, AUTH, "a1", X)
    provider.shutdown()
    by_name = {s.name: s for s in memory.get_finished_spans()}
    chat_request = [by_name["chat m"]]

    def dropped(reason: str) -> float:
        return value(scrape(server), DROPPED, reason=reason) or 0

    assert exporter.export([by_name[f"execute_tool {AUTH}"], by_name[f"invoke_agent {A}"]]) is SpanExportResult.SUCCESS
    assert exporter.export(chat_request) is SpanExportResult.SUCCESS
    wait_for(lambda: server.pipeline.turns_judged == 1)
    assert exporter.export(chat_request) is SpanExportResult.SUCCESS  # the retry
    wait_for(lambda: dropped("duplicate") == 1 and server.pipeline.assembler.pending_traces == 0)

    samples = scrape(server)
    assert {r: value(samples, DROPPED, reason=r) or 0 for r in ("duplicate", "late_call")} == {
        "duplicate": 1,
        "late_call": 0,
    }
    assert server.pipeline.turns_judged == 1 and server.pipeline.assembler.stats.turnless_completed == 0
    assert _calls(samples) == {(AUTH, "correct"): 1}
