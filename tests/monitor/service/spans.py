"""Real OpenTelemetry SDK spans shaped like the GenAI conventions, for the service tests."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer

from monitor.cli.replay_cmd import replay
from monitor.otlp import request_to_json


@dataclass
class Call:
    name: str
    arguments: object | None = None  # dict -> JSON text; str -> as is; None -> not captured
    error: str | None = None
    under: str | None = None  # name of an intermediate span between the turn and the call


@dataclass
class TurnSpec:
    input_text: str
    calls: Sequence[Call] = field(default_factory=list)
    agent: str = "incident-triage"
    output_text: str | None = None


def new_tracer() -> tuple[TracerProvider, Tracer, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "test-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, provider.get_tracer("tests"), exporter


def _call(tracer: Tracer, c: Call, i: int) -> None:
    attrs: dict[str, str] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": c.name,
        "gen_ai.tool.call.id": f"call_{i}",
        "gen_ai.tool.type": "function",
    }
    if c.arguments is not None:
        attrs["gen_ai.tool.call.arguments"] = c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments)
    with tracer.start_as_current_span(f"execute_tool {c.name}", kind=SpanKind.INTERNAL, attributes=attrs) as span:
        if c.error:
            span.set_attribute("error.type", c.error)
            span.set_status(Status(StatusCode.ERROR, c.error))


def record_turn(tracer: Tracer, t: TurnSpec) -> None:
    attrs = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": t.agent,
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": t.input_text}]}]),
    }
    if t.output_text is not None:
        attrs["gen_ai.output.messages"] = json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": t.output_text}]}]
        )
    with tracer.start_as_current_span(f"invoke_agent {t.agent}", attributes=attrs):
        for i, c in enumerate(t.calls):
            if c.under:
                with tracer.start_as_current_span(c.under):
                    _call(tracer, c, i)
            else:
                _call(tracer, c, i)


def record_turns(turns: Sequence[TurnSpec]) -> list[ReadableSpan]:
    provider, tracer, exporter = new_tracer()
    for t in turns:
        record_turn(tracer, t)
    provider.shutdown()
    return list(exporter.get_finished_spans())


def to_request(spans: Sequence[ReadableSpan]) -> ExportTraceServiceRequest:
    return encode_spans(spans)


REPLAY_COUNTS = (
    "turns", "judged_turns", "judged_calls", "correct", "spurious", "hallucinated", "missed", "expected_calls",
)  # fmt: skip


def replay_counts(tmp_path: Path, spans: Sequence[ReadableSpan], rules: Path) -> dict[str, int]:
    """The counts (REPLAY_COUNTS) of `toolwatch replay` of `spans` captured as an OTLP JSON line, grace 0.2 s."""
    captured = tmp_path / "spans.jsonl"
    captured.write_text(request_to_json(to_request(spans)) + "\n", encoding="utf-8")
    out = tmp_path / "replay.json"
    res = CliRunner().invoke(
        replay, [str(captured), "--rules", str(rules), "--grace", "0.2", "--no-progress", "-q", "--json", str(out)]
    )
    assert res.exit_code == 0, res.output
    counts = json.loads(out.read_text())["counts"]
    return {k: counts[k] for k in REPLAY_COUNTS}
