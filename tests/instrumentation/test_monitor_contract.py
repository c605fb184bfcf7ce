"""Contract: the spans the wrapper makes decode and normalize into the records the judge works on."""

from __future__ import annotations

import json

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

import instrumentation as tw
from monitor.normalize import Normalizer
from monitor.otlp import decode_protobuf
from monitor.records import ToolCall, Turn


@tw.tool
def pull_auth_telemetry(service: str, minutes: int = 15) -> dict[str, int]:
    """Auth subsystem telemetry."""
    return {"errors": 3}


def test_wrapper_spans_become_turns_and_calls() -> None:
    provider = tw.configure(exporter="memory", capture_content=True, set_global=False)
    try:
        executor = tw.ToolExecutor([pull_auth_telemetry], on_error="result")
        with tw.agent_turn("[AUTH] login failures", agent="incident-triage", conversation_id="conv",
                           case_id="case-3", tools=executor) as turn:
            executor.execute_tool_calls([
                {"id": "c1", "type": "function",
                 "function": {"name": "pull_auth_telemetry", "arguments": '{"service": "login"}'}},
                {"type": "function_call", "call_id": "c2", "name": "pull_fraud_telemetry", "arguments": "{"},
            ])
            turn.set_output("Result: auth")
        assert provider.exporter is not None
        body = encode_spans(provider.exporter.get_finished_spans()).SerializeToString()  # type: ignore[attr-defined]
    finally:
        provider.shutdown()
    normalizer = Normalizer()
    records = [normalizer.normalize(span) for span in decode_protobuf(body)]
    calls = {r.call_id: r for r in records if isinstance(r, ToolCall)}
    [turn_record] = [r for r in records if isinstance(r, Turn)]
    assert turn_record.input_text == "[AUTH] login failures"
    assert turn_record.output_text == "Result: auth"
    assert turn_record.agent == "incident-triage"
    assert (turn_record.case_id, turn_record.conversation_id) == ("case-3", "conv")
    assert turn_record.tool_definitions is not None
    assert [d["name"] for d in turn_record.tool_definitions] == ["pull_auth_telemetry"]
    assert calls["c1"].name == "pull_auth_telemetry" and calls["c1"].arguments == '{"service": "login"}'
    assert calls["c1"].error_type is None and calls["c1"].parent_span_id == turn_record.span_id
    assert calls["c2"].name == "pull_fraud_telemetry" and calls["c2"].error_type == "UnknownToolError"
    assert calls["c2"].arguments == "{"


def test_truncated_arguments_are_not_captured_rather_than_malformed() -> None:
    provider = tw.configure(exporter="memory", capture_content=True, max_content_length=20, set_global=False)
    try:
        pull_auth_telemetry(service="a-service-name-longer-than-the-limit")
        pull_auth_telemetry(service="short")
        assert provider.exporter is not None
        body = encode_spans(provider.exporter.get_finished_spans()).SerializeToString()  # type: ignore[attr-defined]
    finally:
        provider.shutdown()
    normalizer = Normalizer()
    long_call, short_call = [r for r in map(normalizer.normalize, decode_protobuf(body)) if isinstance(r, ToolCall)]
    assert long_call.arguments is None  # cut: unjudged for arguments and schema, never "malformed"
    assert short_call.arguments is not None and json.loads(short_call.arguments) == {"service": "short"}
