"""Real Prometheus scraping `toolwatch serve` with the shipped recording rules: the first event of a series counts.

Prometheus' `increase()` and `rate()` only see growth between samples of a series: a counter series that first
appears with a value >= 1 looks flat. The monitor therefore creates every series of a known label set at 0 when it
starts (and on each rules reload), so the first hallucinated call of an agent is an increase like any other.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.deploy.binaries import DEPLOY
from tests.deploy.stack import Prometheus, free_port
from tests.monitor.service.conftest import ServeFactory, scrape, value, wait_for
from tests.monitor.service.spans import record_turns
from tests.monitor.service.test_end_to_end import N_TURNS, A, known_turns

SHIPPED_RULES = DEPLOY / "prometheus" / "toolwatch-rules.yml"  # rendered from rules/incident-triage.yaml


def _scalar(prom: Prometheus, expr: str) -> float | None:
    result = prom.query(expr)
    return float(result[0]["value"][1]) if result else None


def _by(prom: Prometheus, expr: str, label: str) -> dict[str, float]:
    return {r["metric"][label]: float(r["value"][1]) for r in prom.query(expr)}


def _wait(what: str, cond: Callable[[], bool], prom: Prometheus, timeout: float = 30.0) -> None:
    try:
        wait_for(cond, timeout=timeout)
    except AssertionError:
        raise AssertionError(f"{what}: not within {timeout:.0f}s\n{prom.log.read_text()[-2000:]}") from None


def _last_scrape(prom: Prometheus) -> float:
    return _scalar(prom, 'timestamp(up{job="toolwatch"})') or 0.0


def test_first_failures_count_in_prometheus(serve: ServeFactory, tmp_path: Path) -> None:
    _, server = serve()
    prom = Prometheus(tmp_path, SHIPPED_RULES, f"127.0.0.1:{server.metrics_port}", f"127.0.0.1:{free_port()}")
    try:
        # The idle server, scraped twice: nothing has happened yet.
        _wait("two scrapes", lambda: (_scalar(prom, 'count_over_time(up{job="toolwatch"}[5m])') or 0) >= 2, prom)
        # The first turns ever: the first correct, wrong-tool, spurious, hallucinated, unjudged call and the first
        # missed calls of the agent (8 correct of 11 judged calls, 3 missed of 11 expected).
        exporter = OTLPSpanExporter(endpoint=server.endpoint, timeout=10)
        assert exporter.export(record_turns(known_turns())) is SpanExportResult.SUCCESS
        exporter.shutdown()  # type: ignore[no-untyped-call]
        wait_for(lambda: server.pipeline.turns_judged == N_TURNS)
        sent = time.time()
        _wait("two scrapes after the turns", lambda: _last_scrape(prom) > sent + 1.5, prom)

        # increase() sees every first event. Every series has samples at the same scrapes (all existed from the
        # start), so they share one extrapolation factor: the increases are in the exact proportions of the counts.
        increases = _by(prom, f'sum by (outcome) (increase(toolwatch_tool_calls_total{{agent="{A}"}}[5m]))', "outcome")
        assert set(increases) == {"correct", "wrong_tool", "spurious", "hallucinated", "unjudged"}
        unit = increases["hallucinated"]
        assert unit > 0
        assert {k: v / unit for k, v in increases.items()} == pytest.approx(
            {"correct": 8, "wrong_tool": 1, "spurious": 1, "hallucinated": 1, "unjudged": 1}
        )
        # Other counters, against the first hallucinated call in the same query (one evaluation time).
        per_call = f'sum(increase(toolwatch_tool_calls_total{{agent="{A}",outcome="hallucinated"}}[5m]))'
        missed = f'sum(increase(toolwatch_missed_calls_total{{agent="{A}"}}[5m])) / {per_call}'
        assert _scalar(prom, missed) == pytest.approx(3)
        malformed = f'sum(increase(toolwatch_schema_violations_total{{agent="{A}",kind="malformed"}}[5m])) / {per_call}'
        assert _scalar(prom, malformed) == pytest.approx(1)

        # The shipped recording rules agree with the judge and with the server's own gauges.
        accuracy = f'agent:toolwatch_tool_call_accuracy:ratio_rate5m{{agent="{A}"}}'
        _wait("the recording rule's accuracy", lambda: _scalar(prom, accuracy) is not None, prom, timeout=15)
        samples = scrape(server)
        assert _scalar(prom, accuracy) == pytest.approx(8 / 11)
        assert value(samples, "toolwatch_tool_call_accuracy_ratio", agent=A, window="5m") == pytest.approx(8 / 11)
        assert _scalar(prom, f'agent:toolwatch_missed_rate:ratio_rate5m{{agent="{A}"}}') == pytest.approx(3 / 11)
        assert _scalar(prom, f'agent:toolwatch_hallucinated_rate:ratio_rate5m{{agent="{A}"}}') == pytest.approx(1 / 12)
    finally:
        prom.stop()
