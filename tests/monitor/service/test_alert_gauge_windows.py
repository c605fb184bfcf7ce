"""A real `serve` fed over OTLP/HTTP: each in-process alert evaluation reads, over a window the gauges also have, the
counts of the gauge of that window at that instant.

The alert windows took their snapshots at the evaluations and the gauges at the worker's ticks, so as a window slid
past the verdicts, the alert and the gauge of one length counted different verdicts.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from monitor.alerts.windows import read_figure
from tests.monitor.service.conftest import RULES, ServeFactory, wait_for
from tests.monitor.service.spans import Call, TurnSpec, record_turns

A = "incident-triage"
AUTH, BILL = "pull_auth_telemetry", "pull_billing_telemetry"
WINDOW_S = 3.0


def _turn(tool: str) -> TurnSpec:
    return TurnSpec("[AUTH] login failures", [Call(tool, {"log_excerpt": "login failures"})], output_text="Result: x")


def test_each_alert_evaluation_reads_the_gauges_counts(serve: ServeFactory, tmp_path: Path) -> None:
    extra = tmp_path / "watch.yaml"
    extra.write_text(
        "alerts:\n  - {name: AccuracyWatch, figure: tool_call_accuracy, agent: incident-triage, above: 0,"
        " window: 3s, for: 0s, min_samples: 1}\n"
    )
    _, server = serve(rules=(str(RULES), str(extra)), windows=(WINDOW_S,), alert_interval_s=0.27)
    live, metrics = server.alerts, server.metrics
    assert live is not None and WINDOW_S in live.windows.windows
    quiet = threading.Event()  # set while every turn sent is judged and none is in flight
    seen: list[tuple[tuple[float | None, float], tuple[float | None, float]]] = []
    tally = live.windows.tally

    def reading(agent: str, window_s: float, now: float | None = None) -> Any:
        """The evaluator's read, and the gauge of that window at the same instant."""
        now = time.monotonic() if now is None else now  # the clock of both in serve
        was_quiet = quiet.is_set()
        got = tally(agent, window_s, now=now)
        if window_s == WINDOW_S and agent == A and got is not None and was_quiet:
            vec = metrics.window_counts(now=now)["3s"].agents.get(A, [0, 0])
            if quiet.is_set():
                gauge = (vec[0] / vec[1] if vec[1] else None, float(vec[1]))
                seen.append((read_figure(got, "tool_call_accuracy", None), gauge))
        return got

    live.windows.tally = reading
    exporter = OTLPSpanExporter(endpoint=server.endpoint, timeout=10)
    rng = random.Random(3)
    sent = 0
    try:
        for _ in range(30):
            quiet.clear()
            turns = [_turn(rng.choice([AUTH, AUTH, BILL])) for _ in range(rng.randrange(1, 4))]
            assert exporter.export(record_turns(turns)) is SpanExportResult.SUCCESS
            sent += len(turns)
            wait_for(lambda: server.pipeline.turns_judged == sent)
            quiet.set()
            time.sleep(rng.uniform(0.1, 0.5))
        time.sleep(WINDOW_S + 1.5)  # the window slides past the last verdicts
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]
        live.windows.tally = tally
    assert len(seen) > 10, seen
    differ = [(alert, gauge) for alert, gauge in seen if alert != gauge]
    assert differ == [], f"{len(differ)} of {len(seen)} evaluations read other counts than the gauge: {differ[:3]}"
    assert seen[-1] == ((None, 0.0), (None, 0.0))  # nothing judged in the last window: absent in both
