"""Oracle turns as real OpenTelemetry SDK spans (GenAI conventions), exported over real OTLP/HTTP; each batch the
server accepted is also written, 4-byte big-endian size first, for `toolwatch replay`."""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from pathlib import Path

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Tracer

from tests.monitor.oracle.oracle import OCall, OTurn


class TeeExporter(SpanExporter):
    def __init__(self, endpoint: str, path: Path) -> None:
        self.otlp = OTLPSpanExporter(endpoint=endpoint, timeout=10)
        self.fh = path.open("wb")
        self.accepted = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.otlp.export(spans)
        if result is SpanExportResult.SUCCESS:
            body = encode_spans(spans).SerializeToString()
            self.fh.write(struct.pack(">I", len(body)) + body)
            self.accepted += len(spans)
        return result

    def shutdown(self) -> None:
        self.otlp.shutdown()  # type: ignore[no-untyped-call]
        self.fh.close()


def _messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def _call(tracer: Tracer, c: OCall, i: int) -> None:
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": c.name, "gen_ai.tool.call.id": f"call_{i}"}
    if c.arguments is not None:
        attrs["gen_ai.tool.call.arguments"] = c.arguments
    with tracer.start_as_current_span(f"execute_tool {c.name}", attributes=attrs):
        pass


def record_turn(tracer: Tracer, t: OTurn) -> None:
    if t.turnless:
        with tracer.start_as_current_span("background job"):  # a trace of calls and no turn span
            for i, c in enumerate(t.calls):
                _call(tracer, c, i)
        return
    attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.input.messages": _messages("user", t.input_text)}
    if t.agent:
        attrs["gen_ai.agent.name"] = t.agent
    if t.output is not None:
        attrs["gen_ai.output.messages"] = _messages("assistant", t.output)
    if t.offered:
        attrs["gen_ai.tool.definitions"] = json.dumps([{"type": "function", "name": n} for n in t.offered])
    with tracer.start_as_current_span(f"invoke_agent {t.agent}", attributes=attrs):
        for i, c in enumerate(t.calls):
            _call(tracer, c, i)


def send(endpoint: str, capture: Path, turns: Sequence[OTurn]) -> int:
    """Exports the turns; returns the spans the server accepted."""
    tee = TeeExporter(endpoint, capture)
    provider = TracerProvider(resource=Resource.create({"service.name": "oracle-agents"}))
    provider.add_span_processor(BatchSpanProcessor(tee, max_export_batch_size=256, schedule_delay_millis=20))
    tracer = provider.get_tracer("oracle")
    for t in turns:
        record_turn(tracer, t)
    assert provider.force_flush(30_000)
    provider.shutdown()
    return tee.accepted
