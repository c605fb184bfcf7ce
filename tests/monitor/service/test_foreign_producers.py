"""OpenInference and OpenLLMetry spans from the real OTel SDK, exported over OTLP/HTTP into `serve`: judged as the
same turns in GenAI spans would be (METRICS.md), with no attribute counted as ignored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from monitor.cli.replay_cmd import replay
from monitor.otlp import request_to_json
from tests.monitor.service.conftest import RULES, ServeFactory, wait_for
from tests.monitor.service.spans import new_tracer, to_request

AUTH = "pull_auth_telemetry"
GOOD = {"log_excerpt": "token expired", "window_minutes": 5}


def _oi_turn(tracer: Any, root_kind: str, question: str, calls: list[tuple[str, dict[str, Any]]]) -> str:
    """An OpenInference run: an AGENT span (or LangChain's root CHAIN) over TOOL spans; its trace id."""
    attrs = {"openinference.span.kind": root_kind, "agent.name": "incident-triage", "input.value": question,
             "output.value": "Result: looked"}  # fmt: skip
    with tracer.start_as_current_span("incident-triage", attributes=attrs) as root:
        for i, (name, args) in enumerate(calls):
            tool = {"openinference.span.kind": "TOOL", "tool.name": name, "tool_call.id": f"call_{i}",
                    "input.value": json.dumps(args), "input.mime_type": "application/json"}  # fmt: skip
            with tracer.start_as_current_span(name, attributes=tool):
                pass
    return format(root.get_span_context().trace_id, "032x")


def _oi_agents_sdk(tracer: Any, question: str) -> str:
    """openai-agents through OpenInference: the trace's root AGENT span holds the run's input and output, the agent
    span under it none, the TOOL span is under the agent span (the root span is named after the run's workflow
    name, the agent of the turn); its trace id."""
    root = {"openinference.span.kind": "AGENT", "input.value": question, "output.value": "Result: looked"}
    with tracer.start_as_current_span("incident-triage", attributes=root) as r:
        with tracer.start_as_current_span("Triage agent", attributes={"openinference.span.kind": "AGENT"}):
            tool = {"openinference.span.kind": "TOOL", "tool.name": AUTH, "input.value": json.dumps(GOOD),
                    "input.mime_type": "application/json"}  # fmt: skip
            with tracer.start_as_current_span(AUTH, attributes=tool):
                pass
    return format(r.get_span_context().trace_id, "032x")


def _tl_turn(tracer: Any, question: str, calls: list[tuple[str, dict[str, Any]]]) -> str:
    """An OpenLLMetry run: an @agent span over @tool spans called by keyword; its trace id."""
    attrs = {"traceloop.span.kind": "agent", "traceloop.entity.name": "incident-triage",
             "traceloop.entity.input": json.dumps({"args": [question], "kwargs": {}})}  # fmt: skip
    with tracer.start_as_current_span("incident-triage.agent", attributes=attrs) as root:
        for name, args in calls:
            tool = {"traceloop.span.kind": "tool", "traceloop.entity.name": name,
                    "traceloop.entity.input": json.dumps({"args": [], "kwargs": args})}  # fmt: skip
            with tracer.start_as_current_span(f"{name}.tool", attributes=tool):
                pass
    return format(root.get_span_context().trace_id, "032x")


def test_openinference_and_traceloop_turns_are_judged(serve: ServeFactory, tmp_path: Path) -> None:
    provider, tracer, exporter = new_tracer()
    names = {
        _oi_turn(tracer, "AGENT", "[AUTH] token expired", [(AUTH, GOOD)]): "oi-agent",
        _oi_turn(tracer, "CHAIN", "[AUTH] token expired", [(AUTH, GOOD)]): "oi-chain",
        _oi_turn(tracer, "AGENT", "[AUTH] token expired", [(AUTH, {"window_minutes": 0})]): "oi-bad-args",
        _oi_turn(tracer, "AGENT", "[AUTH] token expired", []): "oi-missed",
        _tl_turn(tracer, "[AUTH] token expired", [(AUTH, GOOD)]): "tl-agent",
        _oi_agents_sdk(tracer, "[AUTH] token expired"): "oi-agents-sdk",
    }
    provider.shutdown()
    log = tmp_path / "verdicts.jsonl"
    _, server = serve(verdict_log=str(log), verdict_log_all=True)
    otlp = OTLPSpanExporter(endpoint=server.endpoint, timeout=10)
    assert otlp.export(exporter.get_finished_spans()) is SpanExportResult.SUCCESS
    otlp.shutdown()  # type: ignore[no-untyped-call]
    wait_for(lambda: server.pipeline.turns_judged == len(names))
    wait_for(lambda: log.exists() and len(log.read_text().splitlines()) == len(names))
    got = {names[v["trace_id"]]: v for v in map(json.loads, log.read_text().splitlines())}
    assert server.pipeline.normalizer.ignored_attributes == {}
    assert server.pipeline.normalizer.rejected == {}
    ok = [{"name": AUTH, "outcome": "correct", "schema_valid": True, "args_ok": True}]
    for case in ("oi-agent", "oi-chain", "tl-agent"):
        v = got[case]
        assert (v["agent"], v["input"], v["rule"], v["end_to_end"]) == (
            "incident-triage", "[AUTH] token expired", "auth", True), case  # fmt: skip
        assert v["calls"] == ok, case
    nested = got["oi-agents-sdk"]  # one turn, the root's, with the call made under the agent span
    assert (nested["agent"], nested["rule"], nested["end_to_end"], nested["calls"]) == ("incident-triage", "auth", True,
                                                                                       ok)  # fmt: skip
    bad = got["oi-bad-args"]
    assert bad["end_to_end"] is False and bad["calls"][0]["schema_valid"] is False
    assert bad["calls"][0]["args_ok"] is False
    missed = got["oi-missed"]
    assert (missed["rule"], missed["end_to_end"], missed["calls"]) == ("auth", False, [])
    assert missed["missed"] == [AUTH]


def test_replay_of_openinference_spans_as_the_collector_writes_them(tmp_path: Path) -> None:
    """`toolwatch replay` of OTLP JSON lines (the Collector's file exporter) holding OpenInference spans."""
    provider, tracer, exporter = new_tracer()
    _oi_turn(tracer, "AGENT", "[AUTH] token expired", [(AUTH, GOOD)])
    _oi_agents_sdk(tracer, "[AUTH] token expired")
    _oi_turn(tracer, "CHAIN", "[AUTH] token expired", [(AUTH, {"window_minutes": 0})])
    _oi_turn(tracer, "AGENT", "[AUTH] token expired", [])
    provider.shutdown()
    capture = tmp_path / "spans.jsonl"
    capture.write_text(request_to_json(to_request(exporter.get_finished_spans())) + "\n")
    report = tmp_path / "r.json"
    res = CliRunner().invoke(replay, [str(capture), "--rules", str(RULES), "--no-progress", "--json", str(report)])
    assert res.exit_code == 0, res.output
    assert "Tool call accuracy: 3/3 (100.0%)" in res.output  # the right tool each time, its arguments aside
    counts = json.loads(report.read_text())["counts"]
    want = {"turns": 4, "turnless_turns": 0, "judged_calls": 3, "correct": 3, "expected_calls": 4, "missed": 1,
            "end_to_end_turns": 2, "schema_checked_calls": 3, "schema_valid_calls": 2, "args_ok_calls": 2}  # fmt: skip
    assert {k: counts[k] for k in want} == want
