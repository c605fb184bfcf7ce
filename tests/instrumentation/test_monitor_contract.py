"""Contract: the spans the wrapper makes decode and normalize into the records the judge works on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

import instrumentation as tw
from monitor.assembly import TurnAssembler
from monitor.evaluate import load_judge
from monitor.normalize import Normalizer
from monitor.otlp import decode_protobuf
from monitor.records import ToolCall, Turn

RULES = Path(__file__).resolve().parents[2] / "rules" / "incident-triage.yaml"


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


def test_with_redaction_malformed_arguments_are_still_judged_malformed() -> None:
    """Arguments that cannot be redacted (not a JSON object) were left out with redaction on: the monitor then saw no
    arguments and counted no violation, so a model's malformed JSON went unseen exactly where redaction is used."""
    provider = tw.configure(exporter="memory", capture_content=True, redact_keys=["token"], set_global=False)
    try:
        executor = tw.ToolExecutor([pull_auth_telemetry], on_error="result")
        with tw.agent_turn("[AUTH] login failures", agent="incident-triage"):
            executor.execute_tool_calls([
                {"id": "c1", "type": "function",
                 "function": {"name": "pull_auth_telemetry", "arguments": '{"service": "login", "token": "s3cr'}},
                {"id": "c2", "type": "function",
                 "function": {"name": "pull_auth_telemetry", "arguments": '["login", "s3cret"]'}},
            ])
        assert provider.exporter is not None
        body = encode_spans(provider.exporter.get_finished_spans()).SerializeToString()  # type: ignore[attr-defined]
    finally:
        provider.shutdown()
    assert b"s3cr" not in body
    asm = TurnAssembler(grace_s=0)
    [turn] = asm.add(decode_protobuf(body), 2**62) + asm.flush()
    verdict = load_judge([RULES]).judge(turn)
    kinds = {c.call_id: [v.kind.value for v in c.violations] for c in verdict.calls}
    assert kinds["c1"] == ["malformed"]
    assert kinds["c2"] and "malformed" not in kinds["c2"]  # JSON, but not an object
    assert all(c.schema_valid is False for c in verdict.calls)


@tw.tool
def pull_billing_telemetry(log_excerpt: str) -> dict[str, int]:
    """Billing subsystem telemetry."""
    return {"errors": 1}


def _judged_turns(capture_turn_messages: bool) -> dict[str, Any]:
    """[BILL] turns through the wrapper, judged with the shipped triage rules: one answers with the required
    "Result:" line, one answers without it, one fails before answering (the agent raised after its call), one never
    records an answer (set_output not called), one answers past the content limit (the answer is cut)."""
    provider = tw.configure(exporter="memory", capture_content=True, capture_turn_messages=capture_turn_messages,
                            max_content_length=300, set_global=False)
    try:
        for case, output in (("answered", "Result: billing"), ("no-result-line", "billing, I think"),
                             ("no-answer", None), ("not-recorded", ""), ("cut", "x" * 400 + "\nResult: billing")):
            try:
                with tw.agent_turn(f"[BILL] {case}", agent="incident-triage", case_id=case) as turn:
                    pull_billing_telemetry(log_excerpt="charge failed")
                    if output is None:
                        raise RuntimeError("the agent failed before answering")
                    if output:
                        turn.set_output(output)
            except RuntimeError:
                pass
        assert provider.exporter is not None
        body = encode_spans(provider.exporter.get_finished_spans()).SerializeToString()  # type: ignore[attr-defined]
    finally:
        provider.shutdown()
    judge = load_judge([RULES])
    asm = TurnAssembler(grace_s=0)
    turns = asm.add(decode_protobuf(body), 2**62) + asm.flush()
    return {t.case_id or "": judge.judge(t) for t in turns}


def test_a_turn_that_failed_without_an_answer_fails_its_response_checks() -> None:
    """Turn messages captured (the input is on the span) and the turn failed (status ERROR) with no output: the
    required "Result:" line is missing, so the response check fails, as for an answer without that line. A turn that
    simply recorded no answer (it may be on another span) or whose answer was cut is not checked (absent)."""
    v = _judged_turns(capture_turn_messages=True)
    assert [v[c].response_ok for c in ("answered", "no-result-line", "no-answer")] == [True, False, False]
    assert v["not-recorded"].response_ok is None and v["cut"].response_ok is None
    assert v["not-recorded"].end_to_end and v["cut"].end_to_end
    assert v["no-answer"].end_to_end is False
    # the reason names the rule's one response check by its description
    assert v["no-answer"].reason == 'failed (billing): response check failed: a final "Result: ..." line'
    assert v["no-result-line"].reason == v["no-answer"].reason
    assert v["no-answer"].selection_ok and v["no-answer"].args_ok  # its call was right: only the answer fails


def test_without_turn_messages_the_response_is_not_judged() -> None:
    """Turn messages not captured: nothing is known of the answer, so no response check is made (absent), never
    failed; such turns are not judged for routing either, since their input is unknown."""
    v = _judged_turns(capture_turn_messages=False)
    assert all(verdict.response_ok is None for verdict in v.values())


def test_the_sdks_attribute_length_limit_cuts_content_as_marked_truncation(monkeypatch: pytest.MonkeyPatch) -> None:
    """`OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT` under toolwatch's content limit: the SDK would cut the argument JSON
    without a mark, and the monitor would judge the call's arguments `malformed`. They are cut here first, marked."""
    monkeypatch.setenv("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "64")
    provider = tw.configure(exporter="memory", capture_content=True, set_global=False)
    try:
        with tw.agent_turn("[AUTH] login failures", agent="incident-triage") as turn:
            pull_auth_telemetry(service="a-service-name-" + "y" * 80)
            pull_auth_telemetry(service="short")
            turn.set_output("Result: " + "z" * 80)
        assert provider.exporter is not None
        body = encode_spans(provider.exporter.get_finished_spans()).SerializeToString()  # type: ignore[attr-defined]
    finally:
        provider.shutdown()
    records = [Normalizer().normalize(span) for span in decode_protobuf(body)]
    long_call, short_call = [r for r in records if isinstance(r, ToolCall)]
    [turn_record] = [r for r in records if isinstance(r, Turn)]
    assert long_call.arguments is None  # not captured, never "malformed"
    assert short_call.arguments is not None and json.loads(short_call.arguments) == {"service": "short"}
    assert turn_record.output_text is None  # a cut answer is not captured
    asm = TurnAssembler(grace_s=0)
    [verdict] = [load_judge([RULES]).judge(t) for t in asm.add(decode_protobuf(body), 2**62) + asm.flush()]
    assert verdict.calls[0].schema_valid is None and verdict.calls[0].violations == ()  # unjudged, not malformed


APP_SETS_ITS_PROVIDER = """
import sys
import instrumentation as tw  # imported first, as an application does at the top of its module
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tests.instrumentation.test_monitor_contract import pull_auth_telemetry

memory = InMemorySpanExporter()
provider = TracerProvider(span_limits=SpanLimits(max_span_attribute_length=64))
provider.add_span_processor(SimpleSpanProcessor(memory))
trace.set_tracer_provider(provider)  # the application's own global provider, set in code after the import
tw.configure_content(capture_content=True)
with tw.agent_turn("[AUTH] " + "login failures " * 8, agent="incident-triage"):
    pull_auth_telemetry(service="a-service-name-" + "y" * 80)
open(sys.argv[1], "wb").write(encode_spans(memory.get_finished_spans()).SerializeToString())
"""


def test_the_global_providers_attribute_length_limit_set_after_import_cuts_content_as_marked(tmp_path: Path) -> None:
    """The application sets its global provider, with SpanLimits in code, after importing toolwatch (whose tracer
    is then the API's proxy): the SDK cut the arguments unmarked and the monitor judged them `malformed`."""
    out = tmp_path / "spans.pb"
    subprocess.run([sys.executable, "-c", APP_SETS_ITS_PROVIDER, str(out)], check=True, timeout=60,
                   cwd=RULES.parents[1], env={**os.environ, "PYTHONPATH": str(RULES.parents[1])})
    records = [Normalizer().normalize(span) for span in decode_protobuf(out.read_bytes())]
    [call] = [r for r in records if isinstance(r, ToolCall)]
    [turn] = [r for r in records if isinstance(r, Turn)]
    assert call.arguments is None  # not captured, never "malformed"
    assert "gen_ai.input.messages" in turn.attributes["toolwatch.truncated"]  # type: ignore[operator]
