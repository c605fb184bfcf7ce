"""Simulated incident-triage agent traffic through the real OpenTelemetry SDK and OTLP/HTTP exporter."""

from __future__ import annotations

import json
import threading

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

AGENT = "incident-triage"
TAGS = {
    "[AUTH]": "pull_auth_telemetry",
    "[BILL]": "pull_billing_telemetry",
    "[FULF]": "pull_fulfillment_telemetry",
    "[RISK]": "pull_risk_telemetry",
    "[SUPP]": "pull_support_telemetry",
}


def record_turn(tracer: Tracer, line: str, calls: list[tuple[str, dict[str, object]]]) -> None:
    """One `invoke_agent` turn span with its `execute_tool` spans, shaped by the GenAI conventions."""
    attrs = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": AGENT,
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": line}]}]),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": "Checked.\nResult: triaged"}]}]
        ),
    }
    with tracer.start_as_current_span(f"invoke_agent {AGENT}", attributes=attrs):
        for i, (tool, args) in enumerate(calls):
            call_attrs = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "gen_ai.tool.call.id": f"call_{i}",
                "gen_ai.tool.type": "function",
                "gen_ai.tool.call.arguments": json.dumps(args),
            }
            with tracer.start_as_current_span(f"execute_tool {tool}", attributes=call_attrs):
                pass


class Traffic:
    """An agent emitting `rate` turns a second from a thread; `good` False injects an accuracy drop."""

    def __init__(self, endpoint: str, rate: float = 6.0) -> None:
        self.endpoint = endpoint
        self.provider = TracerProvider(resource=Resource.create({"service.name": "triage-agent"}))
        self.provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, timeout=5), schedule_delay_millis=100)
        )
        self.tracer = self.provider.get_tracer("toolwatch-e2e")
        self.interval = 1.0 / rate
        self.good = True
        self.turns = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="e2e-traffic", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        tags = list(TAGS)
        while not self._stop.wait(self.interval):
            tag = tags[self.turns % len(tags)]
            line = f"{tag} error rate above threshold on node-{self.turns % 7}"
            tool = TAGS[tag]
            args: dict[str, object] = {"log_excerpt": line}
            if self.good:
                calls = [(tool, args)]
            else:  # the drop: the neighbouring subsystem's tool, with schema slips and invented tools now and then
                wrong = TAGS[tags[(self.turns + 1) % len(tags)]]
                calls = [(wrong, args if self.turns % 3 else {"excerpt": line})]
                if self.turns % 4 == 0:
                    calls.append(("pull_everything_telemetry", args))
            record_turn(self.tracer, line, calls)
            self.turns += 1

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.provider.shutdown()


def send_odd_spans(endpoint: str) -> None:
    """A span the monitor must reject (a tool span without a tool name) and a batch sent twice (duplicates)."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "triage-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("toolwatch-e2e")
    record_turn(tracer, "[AUTH] duplicate me", [("pull_auth_telemetry", {"log_excerpt": "x"})])
    with tracer.start_as_current_span("execute_tool", attributes={"gen_ai.operation.name": "execute_tool"}):
        pass
    provider.shutdown()
    spans = memory.get_finished_spans()
    exporter = OTLPSpanExporter(endpoint=endpoint, timeout=5)
    exporter.export(spans)
    exporter.export(spans)
    exporter.shutdown()  # type: ignore[no-untyped-call]
