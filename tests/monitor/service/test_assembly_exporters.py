"""Turn assembly as real exporters drive it: a BatchSpanProcessor exporting over OTLP/HTTP into `serve` while the
agent runs, and `toolwatch replay` of the bodies the server accepted, which must give the same figures."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import yaml
from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Tracer

from monitor.alerts import render
from monitor.cli.replay_cmd import replay
from monitor.otlp import request_to_json
from tests.deploy.binaries import promtool
from tests.monitor.service.conftest import RULES, Samples, ServeFactory, scrape, value, wait_for

A = "incident-triage"
AUTH = "pull_auth_telemetry"
GRACE, TIMEOUT = 0.3, 1.0


class TeeExporter(SpanExporter):
    """Exports over OTLP/HTTP and writes each batch the server accepted as one OTLP JSON line."""

    def __init__(self, endpoint: str, fh: IO[str]) -> None:
        self.otlp = OTLPSpanExporter(endpoint=endpoint, timeout=10)
        self.fh = fh

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.otlp.export(spans)
        if result is SpanExportResult.SUCCESS:
            self.fh.write(request_to_json(encode_spans(spans)) + "\n")
        return result

    def shutdown(self) -> None:
        self.otlp.shutdown()  # type: ignore[no-untyped-call]


def _messages(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def _turn_attrs(text: str) -> dict[str, str]:
    return {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": A,
        "gen_ai.input.messages": _messages("user", text),
        "gen_ai.output.messages": _messages("assistant", "Result: looked at it"),
    }


def _tool(tracer: Tracer) -> None:
    attrs = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": AUTH,
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.arguments": json.dumps({"log_excerpt": "login failure"}),
    }
    with tracer.start_as_current_span(f"execute_tool {AUTH}", attributes=attrs):
        pass


def _serve_and_replay(serve: ServeFactory, tmp_path: Path, agent: Callable[[Tracer], None], turns: int) -> tuple[
    Callable[..., float | None], dict[str, int]]:
    """Runs `agent` exporting into serve (grace 0.3 s, turnless timeout 1 s) until `turns` turns were judged;
    returns the served samples (as value(name, **labels)) and the counts of the replay of what serve accepted."""
    v, report, _ = _served_and_replayed(serve, tmp_path, agent, turns)
    return v, report["counts"]


def _served_and_replayed(serve: ServeFactory, tmp_path: Path, agent: Callable[[Tracer], None], turns: int) -> tuple[
    Callable[..., float | None], dict[str, Any], Samples]:
    """_serve_and_replay, with the whole replay report and the scraped samples."""
    _, server = serve(grace_s=GRACE, turnless_timeout_s=TIMEOUT)
    captured = tmp_path / "received.jsonl"
    with captured.open("w", encoding="utf-8") as fh:
        provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
        provider.add_span_processor(BatchSpanProcessor(TeeExporter(server.endpoint, fh), schedule_delay_millis=50))
        agent(provider.get_tracer("tests"))
        assert provider.force_flush(10_000)
        provider.shutdown()
    pipeline = server.pipeline
    wait_for(lambda: pipeline.turns_judged >= turns and not pipeline.queued and not pipeline.assembler.pending_traces)
    samples = scrape(server)
    out = tmp_path / "replay.json"
    res = CliRunner().invoke(replay, [str(captured), "--rules", str(RULES), "--grace", str(GRACE), "--turnless-timeout",
                                      str(TIMEOUT), "--no-progress", "-q", "--json", str(out)])
    assert res.exit_code == 0, res.output
    report: dict[str, Any] = json.loads(out.read_text())
    return (lambda name, **labels: value(samples, name, **labels)), report, samples


def test_a_span_long_before_the_call_does_not_make_it_turnless(serve: ServeFactory, tmp_path: Path) -> None:
    # The request's database span ends (and is exported) 0.7 s before the agent's call: the call still waits the
    # whole turnless timeout (1 s) for its turn, which ends 0.6 s after it.
    def agent(tracer: Tracer) -> None:
        with tracer.start_as_current_span("GET /triage"):
            with tracer.start_as_current_span("SELECT incidents"):
                pass
            time.sleep(0.7)
            with tracer.start_as_current_span(f"invoke_agent {A}", attributes=_turn_attrs("[AUTH] login failure")):
                _tool(tracer)
                time.sleep(0.6)

    v, counts = _serve_and_replay(serve, tmp_path, agent, turns=1)
    # By hand: one [AUTH] turn, its one expected call made: correct, nothing missed, no turnless turn.
    assert v("toolwatch_tool_calls_total", agent=A, tool=AUTH, outcome="correct") == 1
    assert v("toolwatch_missed_calls_total", agent=A, tool=AUTH) == 0
    assert v("toolwatch_turns_total", agent=A, judged="true") == 1
    assert v("toolwatch_turns_total", agent="__other__", judged="false") in (None, 0)
    assert (counts["turns"], counts["turnless_turns"], counts["correct"], counts["missed"]) == (1, 0, 1, 0)


def test_a_turn_outlasting_the_turnless_timeout_is_not_judged_with_its_calls_missing(
    serve: ServeFactory, tmp_path: Path
) -> None:
    # The call is exported at once; the turn ends 1.6 s later, past the turnless timeout (1 s): the call was judged
    # alone by then. The turn is then a late turn, dropped and counted: judged, it would count the call as missed.
    def agent(tracer: Tracer) -> None:
        with tracer.start_as_current_span(f"invoke_agent {A}", attributes=_turn_attrs("[AUTH] login failure")):
            _tool(tracer)
            time.sleep(1.6)

    v, counts = _serve_and_replay(serve, tmp_path, agent, turns=1)
    assert v("toolwatch_missed_calls_total", agent=A, tool=AUTH) == 0
    assert v("toolwatch_turns_total", agent=A, judged="true") == 0
    assert v("toolwatch_turns_total", agent="__other__", judged="false") == 1  # the turnless turn
    assert v("toolwatch_tool_calls_total", agent="__other__", tool=AUTH, outcome="unjudged") == 1
    assert v("toolwatch_spans_dropped_total", reason="late_turn") == 1
    assert (counts["turns"], counts["turnless_turns"], counts["missed"], counts["judged_turns"]) == (1, 1, 0, 0)


def _recorded(tmp_path: Path, samples: Samples, record: str, want: dict[str, float]) -> None:
    """The rendered recording rule `record` (per agent, 5m) over the served counters, as Prometheus evaluates it
    (promtool: each counter growing by its served value a minute), is `want` (agent -> value; absent elsewhere)."""
    series = [{"series": name + "{" + ",".join(f'{k}="{x}"' for k, x in labels) + "}", "values": f"0+{val:g}x10"}
              for (name, labels), val in samples.items() if name.endswith("_total") and val > 0]
    rules = tmp_path / "rules.yml"
    rules.write_text(render({"alerts": []}))
    scale = 1_000_000
    expected = [{"labels": f'{{agent="{a}"}}', "value": round(x * scale)} for a, x in sorted(want.items())]
    check = {"expr": f"round({record} * {scale})", "eval_time": "10m", "exp_samples": expected}
    unit = {"rule_files": [str(rules)], "evaluation_interval": "1m",
            "tests": [{"interval": "1m", "input_series": series, "promql_expr_test": [check]}]}  # fmt: skip
    path = tmp_path / "recorded_test.yml"
    path.write_text(yaml.safe_dump(unit, sort_keys=False))
    result = promtool("test", "rules", path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_calls_of_no_turn_are_no_turn_of_the_tool_usage_rate(serve: ServeFactory, tmp_path: Path) -> None:
    """METRICS.md: tool usage rate = turns with at least one call / all turns, a turn being one agent invocation.
    A background job's call under no turn span is judged alone after the timeout (a turnless group, `__other__`):
    no agent invocation, so in neither term. Counted as a turn with calls it made the report's rate 2 / 3 for the
    agent's 1 / 2, and `__other__`'s recorded rate 1 (calls of no turn: a rate of no turn at all)."""

    def agent(tracer: Tracer) -> None:
        with tracer.start_as_current_span(f"invoke_agent {A}", attributes=_turn_attrs("[AUTH] login failure")):
            _tool(tracer)
        with tracer.start_as_current_span(f"invoke_agent {A}", attributes=_turn_attrs("hello there")):
            pass  # answered without a call
        with tracer.start_as_current_span("background job"):  # a trace of its own, with no turn span
            _tool(tracer)

    v, report, samples = _served_and_replayed(serve, tmp_path, agent, turns=3)
    assert v("toolwatch_turns_total", agent=A, judged="true") == 1
    assert v("toolwatch_turns_total", agent=A, judged="false") == 1
    assert v("toolwatch_turns_total", agent="__other__", judged="false") == 1  # the turnless group, still a count
    assert v("toolwatch_turnless_turns_total", agent="__other__") == 1
    assert v("toolwatch_turnless_turns_total", agent=A) == 0
    assert v("toolwatch_agent_turns_total", agent=A) == 2  # the usage rate's denominator, one counter
    assert v("toolwatch_agent_turns_total", agent="__other__") == 0
    assert v("toolwatch_turns_with_calls_total", agent=A) == 1
    assert v("toolwatch_turns_with_calls_total", agent="__other__") == 0
    counts = report["counts"]
    assert (counts["turns"], counts["turnless_turns"], counts["all_calls"]) == (3, 1, 2)
    assert report["figures"]["tool_usage_rate"] == 0.5
    _recorded(tmp_path, samples, "agent:toolwatch_tool_usage_rate:ratio_rate5m", {A: 0.5})  # __other__: absent
