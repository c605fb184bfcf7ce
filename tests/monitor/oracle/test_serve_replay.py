"""A real `toolwatch serve` (in process, real HTTP, spans from the real OTel SDK and OTLP exporter) and
`toolwatch replay --json` of the same spans, against the oracle: every counter and gauge scraped from /metrics, and
every report figure, the confusion matrix and per-tool precision / recall / F1."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client.exposition import generate_latest

from monitor.cli.replay_cmd import replay
from monitor.serve import ServerThread, Settings
from tests.monitor.oracle import oracle
from tests.monitor.oracle.convert import write_rules
from tests.monitor.oracle.gen import turns
from tests.monitor.oracle.otel import send
from tests.monitor.oracle.published import Labels
from tests.monitor.oracle.scrape import assert_counters, assert_gauges, parse
from tests.monitor.oracle.spec import SPEC

TURNS = 400


def _settings(rules: list[Path], **kw: float) -> Settings:
    return Settings(rules=tuple(map(str, rules)), port=0, metrics_port=0, agents=SPEC.agents, watch_rules=False,
                    alerts=False, poll_interval_s=0.02, windows=(3600.0,), **kw)  # type: ignore[arg-type]


def _labels() -> Labels:
    return Labels(SPEC.tools, SPEC.label_agents)


def _spans(ts: list[oracle.OTurn]) -> int:
    return sum(len(t.calls) + 1 for t in ts)  # a turn span (or the turnless trace's root) and its calls


def _total(page: dict[str, dict[tuple[str, ...], float]], name: str) -> float:
    return sum(page.get(name, {}).values())


def test_serve_and_replay_publish_the_oracle_figures(tmp_path: Path) -> None:
    rules = write_rules(SPEC, tmp_path)
    ts = turns(41, TURNS)
    results = [oracle.judge(SPEC, t) for t in ts]
    capture = tmp_path / "received.pb"
    with ServerThread(_settings(rules, grace_s=0.2, turnless_timeout_s=0.5)) as server:
        assert send(server.endpoint, capture, ts) == _spans(ts)
        deadline = time.monotonic() + 30
        while server.pipeline.turns_judged < TURNS and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.pipeline.turns_judged == TURNS
        time.sleep(1.1)  # a worker tick
        with urllib.request.urlopen(server.metrics_url, timeout=10) as resp:
            page = parse(resp.read().decode())
    phases = [(results, _labels())]
    assert_counters(page, phases)
    assert_gauges(page, phases, "1h")

    out = tmp_path / "report.json"
    args = [str(capture), "--format", "pb-be32", "--no-progress", "-q", "--json", str(out)]
    res = CliRunner().invoke(replay, [*args, *(x for r in rules for x in ("--rules", str(r)))])
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text())
    want = oracle.figures(results)
    assert report["figures"].keys() == want.keys()
    for key, value in want.items():
        assert report["figures"][key] == pytest.approx(value), key
    matrix = oracle.confusion(results)
    assert {(e, a): n for e, a, n in report["confusion"]} == dict(matrix)
    prf = oracle.precision_recall_f1(matrix)
    assert [t["tool"] for t in report["per_tool"]] == sorted(prf)
    for t in report["per_tool"]:
        assert (t["precision"], t["recall"], t["f1"]) == pytest.approx(prf[t["tool"]]), t["tool"]
    counts = report["counts"]
    assert counts["turns"] == TURNS and counts["turnless_turns"] == sum(t.turnless for t in ts)
    assert counts["judged_calls"] == sum(len(r.calls) for r in results if r.judged)


def test_turns_judged_at_graceful_shutdown(tmp_path: Path) -> None:
    """Turns still in their grace period and calls still waiting for their turn are judged when serve stops, and
    counted in full: the metrics after the stop hold every turn, as the oracle says."""
    rules = write_rules(SPEC, tmp_path)
    ts = turns(43, 150)
    thread = ServerThread(_settings(rules, grace_s=120.0, turnless_timeout_s=120.0))
    server = thread.start()
    try:
        send(server.endpoint, tmp_path / "received.pb", ts)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            received = parse(generate_latest(server.metrics.registry()).decode())
            if _total(received, "toolwatch_turns") == 0 and server.pipeline.queued == 0 and sum(
                    server.pipeline._pending().values()) == len(ts):
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the spans were not all held pending")
        assert server.pipeline.turns_judged == 0
    finally:
        thread.stop()
    assert server.pipeline.turns_judged == len(ts)
    page = parse(generate_latest(server.metrics.registry()).decode())
    phases = [([oracle.judge(SPEC, t) for t in ts], _labels())]
    assert_counters(page, phases)
    assert_gauges(page, phases, "1h")
