"""GenAI spans as other producers emit them (the conventions' structured attribute values, chat histories, offered
tools as values), from the real OTel SDK through OTLP/HTTP protobuf and JSON into `serve`: judged as METRICS.md says.

The conventions type `gen_ai.tool.call.arguments` / `.result`, `gen_ai.input.messages` / `gen_ai.output.messages`
and `gen_ai.tool.definitions` as "any", to be recorded in structured form where the SDK supports it (the Python SDK
does: a dict becomes a kvlistValue, a list an arrayValue), else as a JSON string.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import SpanKind

from monitor.otlp import request_to_json
from tests.monitor.service.conftest import ServeFactory, wait_for
from tests.monitor.service.spans import new_tracer, to_request

AUTH = "pull_auth_telemetry"
ANSWER = [{"role": "assistant", "parts": [{"type": "text", "content": "Result: looked"}], "finish_reason": "stop"}]


def _msgs(*pairs: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"role": r, "parts": [{"type": "text", "content": t}]} for r, t in pairs]


def _record(turns: list[tuple[str, dict[str, Any], list[dict[str, Any]]]]) -> tuple[list[ReadableSpan], dict[str, str]]:
    """Turns (case name, turn attributes, calls' attributes) as real SDK spans; trace id -> case name."""
    provider, tracer, exporter = new_tracer()
    names: dict[str, str] = {}
    for case, attrs, calls in turns:
        turn_attrs = {"gen_ai.operation.name": "invoke_agent", **attrs}
        with tracer.start_as_current_span(f"invoke_agent {case}", kind=SpanKind.CLIENT, attributes=turn_attrs) as t:
            for i, c in enumerate(calls):
                call_attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.call.id": f"call_{i}", **c}
                with tracer.start_as_current_span(f"execute_tool {c['gen_ai.tool.name']}", attributes=call_attrs):
                    pass
        names[format(t.get_span_context().trace_id, "032x")] = case
    provider.shutdown()
    return list(exporter.get_finished_spans()), names


def _verdicts(serve: ServeFactory, tmp_path: Path, spans: list[ReadableSpan], names: dict[str, str], transport: str,
              **settings: Any) -> dict[str, dict[str, Any]]:
    log = tmp_path / f"verdicts-{transport}.jsonl"
    _, server = serve(verdict_log=str(log), verdict_log_all=True, **settings)
    if transport == "protobuf":
        exporter = OTLPSpanExporter(endpoint=server.endpoint, timeout=10)
        assert exporter.export(spans) is SpanExportResult.SUCCESS
        exporter.shutdown()  # type: ignore[no-untyped-call]
    else:  # OTLP JSON, as the Collector's otlphttp exporter with encoding: json sends it
        body = request_to_json(to_request(spans)).encode()
        req = urllib.request.Request(server.endpoint, body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 200 and b"rejected" not in resp.read()
    wait_for(lambda: server.pipeline.turns_judged == len(names))
    wait_for(lambda: log.exists() and len(log.read_text().splitlines()) == len(names))
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert server.pipeline.normalizer.ignored_attributes == {}  # the conventions' forms are no wrong types
    return {names[v["trace_id"]]: v for v in lines}


TRANSPORTS = ["protobuf", "json"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_structured_tool_arguments_and_results_are_judged(serve: ServeFactory, tmp_path: Path, transport: str) -> None:
    base = {"gen_ai.agent.name": "incident-triage", "gen_ai.input.messages": json.dumps(_msgs(("user", "[AUTH] x")))}
    good = {"log_excerpt": "token expired", "window_minutes": 5}
    spans, names = _record(
        [
            ("string", base, [{"gen_ai.tool.name": AUTH, "gen_ai.tool.call.arguments": json.dumps(good)}]),
            ("kvlist", base, [{"gen_ai.tool.name": AUTH, "gen_ai.tool.call.arguments": good,
                               "gen_ai.tool.call.result": {"status": "ok", "samples": [1, 2], "detail": {}}}]),
            # structured arguments that break the schema: judged as such, never `malformed`
            ("kvlist-invalid", base, [{"gen_ai.tool.name": AUTH, "gen_ai.tool.call.arguments": {"window_minutes": 0}}]),
            # an empty kvlistValue (a tool called without arguments) is an empty object
            ("empty", base, [{"gen_ai.tool.name": AUTH, "gen_ai.tool.call.arguments": {}}]),
        ]
    )  # fmt: skip
    got = _verdicts(serve, tmp_path, spans, names, transport)
    ok = [{"name": AUTH, "outcome": "correct", "schema_valid": True, "args_ok": True}]
    assert got["string"]["calls"] == ok
    assert got["kvlist"]["calls"] == ok
    bad = got["kvlist-invalid"]["calls"][0]
    assert bad["schema_valid"] is False and bad["args_ok"] is False
    assert sorted(v.split(":")[0] for v in bad["violations"]) == ["other", "required"]
    empty = got["empty"]["calls"][0]
    assert empty["schema_valid"] is False and empty["violations"] == ["required: 'log_excerpt' is a required property"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_turn_input_is_the_users_latest_input(serve: ServeFactory, tmp_path: Path, transport: str) -> None:
    call = [{"gen_ai.tool.name": AUTH, "gen_ai.tool.call.arguments": json.dumps({"log_excerpt": "x"})}]
    history = _msgs(
        ("system", "[BILL] you triage"),
        ("user", "[BILL] refund blocked"),
        ("assistant", "Result: billing"),
        ("user", "[AUTH] token expired"),
    )
    agentic = [
        *_msgs(("user", "[AUTH] token expired"), ("user", "it started at noon")),
        {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_0", "name": AUTH, "arguments": {"a": 1}}]},
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_0", "response": "[BILL] ok"}]},
    ]
    multimodal = [
        {"role": "user", "content": "[BILL] an older question, in the plain content form"},
        {"role": "assistant", "parts": []},
        {"role": "user", "parts": [{"type": "blob", "modality": "image", "mime_type": "image/png", "content": "AA=="},
                                   {"type": "text", "content": "[AUTH] what fails here?"}]},
    ]  # fmt: skip
    out = json.dumps(ANSWER)
    a = {"gen_ai.agent.name": "incident-triage", "gen_ai.output.messages": out}
    spans, names = _record(
        [
            ("history", {**a, "gen_ai.input.messages": json.dumps(history)}, call),
            ("history-structured", {**a, "gen_ai.input.messages": history, "gen_ai.output.messages": ANSWER}, call),
            ("agentic", {**a, "gen_ai.input.messages": json.dumps(agentic)}, call),
            ("multimodal", {**a, "gen_ai.input.messages": json.dumps(multimodal)}, call),
            ("instructions", {**a, "gen_ai.input.messages": _msgs(("user", "[AUTH] token expired")),
                              "gen_ai.system_instructions": [{"type": "text", "content": "[BILL] sys"}]}, call),
        ]
    )  # fmt: skip
    got = _verdicts(serve, tmp_path, spans, names, transport)
    assert got["history"]["input"] == "[AUTH] token expired"
    assert got["history-structured"]["input"] == "[AUTH] token expired"
    assert got["agentic"]["input"] == "[AUTH] token expired\nit started at noon"
    assert got["multimodal"]["input"] == "[AUTH] what fails here?"
    assert got["instructions"]["input"] == "[AUTH] token expired"
    for case, v in got.items():
        assert (v["rule"], v["end_to_end"], v["calls"][0]["outcome"]) == ("auth", True, "correct"), case


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_structured_tool_definitions_join_the_catalog(serve: ServeFactory, tmp_path: Path, transport: str) -> None:
    rules = tmp_path / "defs.yaml"
    rules.write_text(
        "version: 1\nagent: defs\ncatalog: {from_definitions: true}\n"
        "expect:\n  - id: look\n    when: {prefix: '[LOOK]'}\n    call: [{tool: lookup, exactly: 1}]\n"
    )
    params = {"type": "object", "properties": {"q": {"type": "string"}, "unit": {"enum": ["a", "b"]}},
              "required": ["q"], "additionalProperties": False}  # fmt: skip
    conventions = [{"type": "function", "name": "lookup", "description": "Look up", "parameters": params}]
    chat = [{"type": "function", "function": {"name": "lookup", "description": "Look up", "parameters": params}}]
    base = {"gen_ai.agent.name": "defs", "gen_ai.input.messages": json.dumps(_msgs(("user", "[LOOK] x")))}
    call = [{"gen_ai.tool.name": "lookup", "gen_ai.tool.call.arguments": {"unit": "c"}}]
    spans, names = _record(
        [
            ("string", {**base, "gen_ai.tool.definitions": json.dumps(conventions)}, call),
            ("structured", {**base, "gen_ai.tool.definitions": conventions}, call),
            ("chat-string", {**base, "gen_ai.tool.definitions": json.dumps(chat)}, call),
            ("chat-structured", {**base, "gen_ai.tool.definitions": chat}, call),
        ]
    )
    got = _verdicts(serve, tmp_path, spans, names, transport, rules=(str(rules),))
    for case, v in got.items():
        c = v["calls"][0]
        assert (c["outcome"], c["schema_valid"]) == ("correct", False), case
        assert sorted(x.split(":")[0] for x in c["violations"]) == ["enum", "required"], case
