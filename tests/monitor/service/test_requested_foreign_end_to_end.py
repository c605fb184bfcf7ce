"""Requested calls of an OpenInference trace end to end: real SDK spans (openai-agents' shapes through OpenInference)
over the real OTLP/HTTP exporter into `toolwatch serve`, exact metric values."""

from __future__ import annotations

from contextlib import AbstractContextManager

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import Span, Tracer

from tests.monitor.service.conftest import ServeFactory, scrape, value, wait_for
from tests.monitor.service.spans import new_tracer
from tests.monitor.service.test_requested_foreign import oi_handoff, oi_llm, oi_tool

A = "incident-triage"
AUTH, BILL, RISK = "pull_auth_telemetry", "pull_billing_telemetry", "pull_risk_telemetry"
X = '{"log_excerpt": "x"}'


def _root(tracer: Tracer, text: str) -> AbstractContextManager[Span]:
    attrs = {"openinference.span.kind": "AGENT", "agent.name": A, "input.value": text,
             "output.value": "Result: looked at it"}  # fmt: skip
    return tracer.start_as_current_span(A, attributes=attrs)


Key = tuple[str, tuple[tuple[str, str], ...]]


def k(name: str, **labels: str) -> Key:
    """A series of the agent's: its metric name and its labels."""
    return name, tuple(sorted({"agent": A, **labels}.items()))


def judged(serve: ServeFactory, spans: list[ReadableSpan], series: dict[Key, int]) -> dict[Key, float]:
    """The values of `series` (0 when absent) once `serve` judged the 3 turns of `spans` sent through the exporter."""
    _, server = serve()
    exporter = OTLPSpanExporter(endpoint=server.endpoint, timeout=10)
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    wait_for(lambda: server.pipeline.turns_judged == 3)
    samples = scrape(server)
    return {key: value(samples, key[0], **dict(key[1])) or 0 for key in series}


def _spans() -> list[ReadableSpan]:
    provider, tracer, memory = new_tracer()
    # The model asked for a tool that does not exist; the framework refused it, nothing ran: hallucinated (and the
    # risk call missed), seen only as requested.
    # (and a tool call without a name: ignored and counted, the turn judged all the same)
    with _root(tracer, "[RISK] score spike"):
        oi_llm(tracer, ("pull_risk_telemtry", "call_r", X), (None, "call_x", X))
        oi_llm(tracer)
    # Requested and run (openai-agents' tool span has no call id: paired by name): one correct call, not two.
    with _root(tracer, "[AUTH] login failure"):
        oi_llm(tracer, (AUTH, "call_a", X))
        oi_tool(tracer, AUTH, {"log_excerpt": "x"})
        oi_llm(tracer)
    # A handoff the model asked for (`transfer_to_billing_agent`) is no call: not hallucinated.
    with _root(tracer, "[BILL] refund blocked"):
        oi_llm(tracer, ("transfer_to_billing_agent", "call_h", None))
        oi_handoff(tracer, "Billing agent")
        with tracer.start_as_current_span("Billing agent", attributes={"openinference.span.kind": "AGENT"}):
            oi_llm(tracer, (BILL, "call_b", X))
            oi_tool(tracer, BILL, {"log_excerpt": "x"})
            oi_llm(tracer)
    provider.shutdown()
    return list(memory.get_finished_spans())


def test_an_openinference_trace_counts_a_requested_unknown_tool_and_a_call_that_ran_once(serve: ServeFactory) -> None:
    calls = "toolwatch_tool_calls_total"
    expected = {
        k(calls, tool=AUTH, outcome="correct"): 1,
        k(calls, tool=AUTH, outcome="spurious"): 0,
        k(calls, tool=BILL, outcome="correct"): 1,
        k(calls, tool=BILL, outcome="spurious"): 0,
        k(calls, tool="__other__", outcome="hallucinated"): 1,
        k("toolwatch_judged_calls_total", tool=AUTH): 1,
        k("toolwatch_judged_calls_total", tool=BILL): 1,
        k("toolwatch_judged_calls_total", tool="__other__"): 1,
        k("toolwatch_missed_calls_total", tool=RISK): 1,
        k("toolwatch_missed_calls_total", tool=AUTH): 0,
        k("toolwatch_turns_total", judged="true"): 3,
        k("toolwatch_turn_checks_total", check="selection", result="pass"): 2,
        k("toolwatch_turn_checks_total", check="selection", result="fail"): 1,
        ("toolwatch_span_attributes_ignored_total", (("attribute", "llm.output_messages"),)): 1,
    }
    assert judged(serve, _spans(), expected) == expected


def _genai_openllmetry_spans() -> list[ReadableSpan]:
    """GenAI turns whose model request spans are newer OpenLLMetry's: `gen_ai.operation.name` and `llm.request.type`,
    the calls flattened into `gen_ai.completion.*`."""
    from tests.monitor.service.test_requested_calls import agent_turn
    from tests.monitor.service.test_requested_foreign import OP_CHAT, OUT, _parts, tl_chat

    provider, tracer, memory = new_tracer()
    # No output messages: the flattened call is read.
    with agent_turn(tracer, "[AUTH] login failure", A):
        tl_chat(tracer, (AUTH, "call_a", X), extra=OP_CHAT)
    # Output messages with the call too: read once, from them (not a spurious second call).
    with agent_turn(tracer, "[RISK] score spike", A):
        tl_chat(tracer, (RISK, "call_r", X), extra={**OP_CHAT, OUT: _parts(RISK)})
    # Output messages that cannot be read (counted): the flattened call is read.
    with agent_turn(tracer, "[BILL] refund blocked", A):
        tl_chat(tracer, (BILL, "call_b", X), extra={**OP_CHAT, OUT: '[{"parts":[{"type":"tool_call"'})
    provider.shutdown()
    return list(memory.get_finished_spans())


def test_a_genai_trace_of_newer_openllmetry_chat_spans_counts_each_requested_call_once(serve: ServeFactory) -> None:
    calls = "toolwatch_tool_calls_total"
    expected = {
        **{k(calls, tool=t, outcome="correct"): 1 for t in (AUTH, RISK, BILL)},
        **{k(calls, tool=t, outcome="spurious"): 0 for t in (AUTH, RISK, BILL)},
        **{k("toolwatch_judged_calls_total", tool=t): 1 for t in (AUTH, RISK, BILL)},
        **{k("toolwatch_missed_calls_total", tool=t): 0 for t in (AUTH, RISK, BILL)},
        k("toolwatch_turns_total", judged="true"): 3,
        k("toolwatch_turn_checks_total", check="selection", result="pass"): 3,
        ("toolwatch_span_attributes_ignored_total", (("attribute", "gen_ai.output.messages"),)): 1,
    }
    assert judged(serve, _genai_openllmetry_spans(), expected) == expected
