"""Replaying the spans `serve` received gives exactly the figures `serve` published.

The triage example runs under the instrumentation; a BatchSpanProcessor exports through the real
OTLP/HTTP exporter to an in-process `toolwatch serve`, and each batch the server accepted is also written
as one OTLP JSON line (the Collector file exporter format). `toolwatch replay` of that file must give the
counters and figures the server published on /metrics.
"""

from __future__ import annotations

import json
import random
import time
import urllib.request
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from prometheus_client.parser import text_string_to_metric_families

from monitor.cli.replay_cmd import replay
from monitor.evaluate import Harness, load_callable
from monitor.otlp import request_to_json
from monitor.serve import ServerThread, Settings
from tests.monitor.offline.conftest import TRIAGE_RULES

# Loaded the way `--agent` / `--generator` load them (examples/ is not a package the type checker follows).
triage = load_callable("examples.triage.agent:triage")
generate = load_callable("examples.triage.generator:generate")

AGENT = "incident-triage"
TURNS = 300


class TeeExporter(SpanExporter):
    """Exports over OTLP/HTTP and writes each batch the server accepted as one OTLP JSON line."""

    def __init__(self, endpoint: str, path: Path) -> None:
        self.otlp = OTLPSpanExporter(endpoint=endpoint, timeout=10)
        self.fh = path.open("w", encoding="utf-8")
        self.accepted = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = self.otlp.export(spans)
        if result is SpanExportResult.SUCCESS:
            self.fh.write(request_to_json(encode_spans(spans)) + "\n")
            self.accepted += len(spans)
        return result

    def shutdown(self) -> None:
        self.otlp.shutdown()  # type: ignore[no-untyped-call]
        self.fh.close()


def _scrape(url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[s.name].append((s.labels, s.value))
    return out


def _sum(m: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    return sum(v for lab, v in m[name] if lab.get("agent") == AGENT and all(lab.get(k) == x for k, x in labels.items()))


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def test_replay_of_what_serve_received_gives_the_published_figures(tmp_path: Path) -> None:
    settings = Settings(rules=(str(TRIAGE_RULES),), port=0, metrics_port=0, grace_s=0.3, turnless_timeout_s=2.0,
                        watch_rules=False, poll_interval_s=0.02)
    captured = tmp_path / "received.jsonl"
    thread = ServerThread(settings)
    server = thread.start()
    try:
        tee = TeeExporter(server.endpoint, captured)
        rng = random.Random(11)
        with Harness(agent_name=AGENT) as h:
            h.provider.add_span_processor(BatchSpanProcessor(tee, max_export_batch_size=50, schedule_delay_millis=20))
            for _ in range(TURNS):
                h.run(triage, generate(rng))
                h.exporter.drain()  # only the OTLP path matters here; keep the in-memory buffer empty
            assert h.provider.force_flush(10_000)
        deadline = time.monotonic() + 30
        while server.pipeline.turns_judged < TURNS and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.pipeline.turns_judged == TURNS
        time.sleep(1.2)  # one metrics tick, so the rolling gauges include every verdict
        m = _scrape(server.metrics_url)
    finally:
        thread.stop()
    assert tee.accepted > 0

    out = tmp_path / "replay.json"
    res = CliRunner().invoke(replay, [str(captured), "--rules", str(TRIAGE_RULES), "--grace", "0.3",
                                      "--turnless-timeout", "2", "--no-progress", "-q", "--json", str(out)])
    assert res.exit_code == 0, res.output
    rep = json.loads(out.read_text())
    c, f = rep["counts"], rep["figures"]

    outcome = {o: _sum(m, "toolwatch_tool_calls_total", outcome=o)
               for o in ("correct", "wrong_tool", "spurious", "hallucinated", "unjudged")}
    served_counts = {
        "turns": _sum(m, "toolwatch_turns_total"),
        "judged_turns": _sum(m, "toolwatch_turns_total", judged="true"),
        "judged_calls": _sum(m, "toolwatch_judged_calls_total"),
        "all_calls": sum(outcome.values()),
        "missed": _sum(m, "toolwatch_missed_calls_total"),
        "expected_calls": _sum(m, "toolwatch_expected_calls_total"),
        "selection_ok_turns": _sum(m, "toolwatch_turn_checks_total", check="selection", result="pass"),
        "end_to_end_turns": _sum(m, "toolwatch_turn_checks_total", check="end_to_end", result="pass"),
        "schema_checked_calls": _sum(m, "toolwatch_schema_checked_calls_total"),
        "args_checked_calls": _sum(m, "toolwatch_argument_checked_calls_total"),
        **outcome,
    }
    assert {k: c[k] for k in served_counts} == {k: int(v) for k, v in served_counts.items()}
    assert served_counts["turns"] == TURNS and 0 < outcome["correct"] < served_counts["judged_calls"]

    served_figures = {
        "tool_call_accuracy": _ratio(outcome["correct"], served_counts["judged_calls"]),
        "spurious_rate": _ratio(outcome["spurious"], served_counts["judged_calls"]),
        "wrong_tool_rate": _ratio(outcome["wrong_tool"], served_counts["judged_calls"]),
        "hallucinated_rate": _ratio(outcome["hallucinated"], served_counts["all_calls"]),
        "missed_rate": _ratio(served_counts["missed"], served_counts["expected_calls"]),
        "selection_accuracy": _ratio(served_counts["selection_ok_turns"], served_counts["judged_turns"]),
        "end_to_end_accuracy": _ratio(served_counts["end_to_end_turns"], served_counts["judged_turns"]),
        "argument_correctness": _ratio(  # its numerator one counter, as the recording rules read it
            _sum(m, "toolwatch_argument_ok_calls_total"), served_counts["args_checked_calls"]),
        "schema_adherence": _ratio(
            _sum(m, "toolwatch_schema_valid_calls_total"), served_counts["schema_checked_calls"]),
        "response_compliance": _ratio(
            _sum(m, "toolwatch_turn_checks_total", check="response", result="pass"),
            _sum(m, "toolwatch_response_checked_turns_total")),
        "tool_usage_rate": _ratio(  # over agent turns: a turnless group is none
            _sum(m, "toolwatch_turns_with_calls_total"),
            _sum(m, "toolwatch_agent_turns_total")),
    }
    assert {k: f[k] for k in served_figures} == served_figures

    served_confusion = {(lab["expected"], lab["actual"]): int(v) for lab, v in m["toolwatch_confusion_total"]
                        if lab.get("agent") == AGENT and v}
    assert {(e, a): n for e, a, n in rep["confusion"]} == served_confusion
    assert any(a == "(unknown)" for _, a in served_confusion)  # hallucinated calls took the same path

    for gauge, key in (("toolwatch_tool_call_accuracy_ratio", "tool_call_accuracy"),
                       ("toolwatch_missed_call_ratio", "missed_rate"),
                       ("toolwatch_end_to_end_accuracy_ratio", "end_to_end_accuracy")):
        published = [v for lab, v in m[gauge] if lab.get("agent") == AGENT and lab.get("window") == "5m"]
        assert published == [f[key]], gauge
