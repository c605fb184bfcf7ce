"""End to end: monitor under simulated traffic, real Prometheus and Alertmanager, an injected accuracy drop.

The rule file's alerts are made short (15s windows, for 2s, 10 samples; burn-rate windows scaled down) so the
run takes seconds; promtool unit tests (test_prometheus_rules.py) cover the shipped windows. The same short rule
file drives `toolwatch serve`'s own in-process alerts.
"""

from __future__ import annotations

import json
import re
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from monitor.alerts import BurnWindow, LiveAlerts, render
from monitor.rules import load_rules
from monitor.serve import Server, ServerThread, Settings
from tests.deploy.binaries import DEPLOY, ROOT, promtool
from tests.deploy.receiver import Receiver
from tests.deploy.stack import Alertmanager, Process, Prometheus, free_port, get_json, wait_http
from tests.deploy.traffic import AGENT, Traffic, send_odd_spans

RULES = ROOT / "rules" / "incident-triage.yaml"
HEALTH = DEPLOY / "prometheus" / "toolwatch-health.yml"  # the shipped alerts on toolwatch itself, as they are
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "toolwatch.json"
ALERT = "ToolCallAccuracyLow"


@dataclass
class Stack:
    server: Server
    live: LiveAlerts
    prometheus: Prometheus
    alertmanager: Alertmanager
    receiver: Receiver
    traffic: Traffic


# The burn-rate windows scaled down 120x (1h -> 30s, 5m -> ~2.5s is too short for a 1s scrape: 6s).
SHORT_BURN = (BurnWindow("30s", "6s", 14.4, "critical"), BurnWindow("60s", "12s", 6.0, "warning"))


def short_rules(path: Path) -> Path:
    """The shipped rule file with its alerts made short: window 15s, for 2s, 10 samples."""
    doc = yaml.safe_load(RULES.read_text())
    for alert in doc["alerts"]:
        alert.update(window="15s", min_samples=10, **{"for": "2s"})
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    work = tmp_path_factory.mktemp("e2e")
    rule_file = short_rules(work / "incident-triage.yaml")
    rules = work / "toolwatch-rules.yml"
    rules.write_text(render(load_rules([rule_file]), burn_windows=SHORT_BURN))
    receiver = Receiver()
    settings = Settings(
        rules=(str(rule_file),),
        port=0,
        metrics_port=0,
        grace_s=0.3,
        watch_rules=False,
        alert_webhook=receiver.url + "/in-process/api/v2/alerts",  # the serve's own in-process alerts
        alert_interval_s=0.5,
    )
    serve = ServerThread(settings)
    stopping: list[Callable[[], object]] = [receiver.close]
    try:
        server = serve.start()
        stopping.append(serve.stop)
        assert server.alerts is not None, "toolwatch serve evaluates the rule file's alerts in process"
        am = Alertmanager(work, receiver.url + "/alertmanager")
        stopping.append(am.stop)
        prom = Prometheus(work, rules, f"127.0.0.1:{server.metrics_port}", f"127.0.0.1:{am.port}")
        stopping.append(prom.stop)
        traffic = Traffic(server.endpoint)
        traffic.start()
        stopping.append(traffic.stop)
        yield Stack(server, server.alerts, prom, am, receiver, traffic)
    finally:
        for stop in reversed(stopping):
            stop()


def wait_until(what: str, check: Callable[[], bool], timeout: float, stack: Stack) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.25)
    raise AssertionError(
        f"timed out after {timeout:.0f}s waiting for {what}\n{stack.prometheus.log.read_text()[-2000:]}"
    )


def value(stack: Stack, expr: str) -> float | None:
    result = stack.prometheus.query(expr)
    return float(result[0]["value"][1]) if result else None


def alertmanager_posts(stack: Stack) -> list[dict[str, Any]]:
    return [body for path, body in stack.receiver.posts if path.startswith("/alertmanager")]


def test_drop_fires_in_prometheus_reaches_alertmanager_and_the_webhook(stack: Stack) -> None:
    guard = f'agent:toolwatch_judged_calls:increase15s{{agent="{AGENT}"}}'
    accuracy = f'agent:toolwatch_tool_call_accuracy:ratio_rate15s{{agent="{AGENT}"}}'
    # Steady state: enough judged calls for the guard, accuracy 100%, nothing fires anywhere.
    wait_until("steady traffic in Prometheus", lambda: (value(stack, guard) or 0) >= 10, 30, stack)
    time.sleep(4)  # longer than the alert's for: 2s
    assert value(stack, accuracy) == 1.0
    assert stack.prometheus.alerts() == []
    assert stack.alertmanager.alerts() == []
    assert stack.receiver.posts == []
    assert stack.live.active() == []
    # Inject the drop.
    stack.traffic.good = False
    wait_until(
        f"{ALERT} firing in Prometheus",
        lambda: any(a["labels"]["alertname"] == ALERT and a["state"] == "firing" for a in stack.prometheus.alerts()),
        40,
        stack,
    )
    fired = next(a for a in stack.prometheus.alerts() if a["labels"]["alertname"] == ALERT)
    assert fired["labels"]["agent"] == AGENT and fired["labels"]["severity"] == "warning"
    assert float(fired["value"]) < 0.9
    assert re.fullmatch(r"Tool call accuracy of agent incident-triage is \d+(\.\d+)?% over the last 15s .*",
                        fired["annotations"]["description"])  # fmt: skip
    wait_until(
        f"{ALERT} in Alertmanager",
        lambda: any(a["labels"]["alertname"] == ALERT for a in stack.alertmanager.alerts()),
        20,
        stack,
    )
    assert stack.receiver.wait_for(
        lambda posts: any(
            a["labels"]["alertname"] == ALERT and a["status"] == "firing"
            for path, body in posts
            if path.startswith("/alertmanager")
            for a in body["alerts"]
        ),
        20,
    ), stack.receiver.posts
    delivered = next(b for b in alertmanager_posts(stack) if b["commonLabels"].get("alertname") == ALERT)
    assert delivered["receiver"] == "toolwatch-webhook" and delivered["commonLabels"]["agent"] == AGENT
    assert delivered["alerts"][0]["annotations"]["summary"].startswith("Fewer than 90%")
    # The same definitions in process: firing, exposed on /metrics, posted to the Alertmanager API endpoint.
    wait_until("in-process alert", lambda: (ALERT, AGENT, "warning") in stack.live.table(), 10, stack)
    with urllib.request.urlopen(stack.server.metrics_url, timeout=5) as response:
        exposition = response.read().decode()
    assert f'toolwatch_alert_active{{agent="{AGENT}",alertname="{ALERT}",severity="warning"}} 1.0' in exposition
    assert stack.receiver.wait_for(
        lambda posts: any(p.startswith("/in-process/api/v2/alerts") for p, _ in posts), 10
    ), stack.receiver.posts


def test_health_alerts_load_evaluate_and_stay_silent_on_a_healthy_monitor(stack: Stack) -> None:
    """The shipped prometheus.yml's second rule file, unchanged: loaded, every rule evaluated without error, every
    series it selects exposed by the live monitor, and no alert pending while the monitor is healthy (an accuracy
    drop, as the tests above inject, is the agents' problem, not the monitor's)."""
    (expected,) = yaml.safe_load(HEALTH.read_text())["groups"]
    # Before the first scrape no replica is up: ToolwatchDown rightly goes pending. From the first scrape on, no more.
    wait_until("the first scrape", lambda: value(stack, 'up{job="toolwatch"}') == 1.0, 20, stack)
    started = time.time()

    def group() -> dict[str, Any] | None:
        groups = get_json(f"{stack.prometheus.url}/api/v1/rules")["data"]["groups"]
        return next((g for g in groups if g["name"] == expected["name"]), None)

    def evaluated() -> bool:
        g = group()
        return g is not None and all(_unix(r["lastEvaluation"]) > started for r in g["rules"])

    wait_until("the health group evaluated", evaluated, 20, stack)
    loaded = group()
    assert loaded is not None and loaded["file"].endswith("toolwatch-health.yml")
    assert [r["name"] for r in loaded["rules"]] == [r["alert"] for r in expected["rules"]]
    for rule in loaded["rules"]:
        assert (rule["health"], rule.get("lastError", "")) == ("ok", ""), rule["name"]
        assert rule["state"] == "inactive" and rule["alerts"] == [], (rule["name"], rule["alerts"])
    # Every selector of the health rules matches series of the live monitor (a label value it never exposes would
    # keep an alert silent however bad things got), 503s and UNAVAILABLE included, which a healthy monitor never
    # answers: their series are there at 0 from the start.
    assert stack.prometheus.query('toolwatch_requests_total{code="200"} > 0'), "no request counted"
    for rule in expected["rules"]:
        for selector in re.findall(r"\b(?:toolwatch_[a-z_]+|up)(?:\{[^}]*\})?", rule["expr"]):
            assert stack.prometheus.query(selector), f"{rule['alert']}: {selector} matches no series"


def test_shipped_accuracy_rules_select_only_series_the_monitor_exposes(stack: Stack) -> None:
    """Every toolwatch_* selector of the shipped, rendered toolwatch-rules.yml (recording rules, and the failing-rule
    query of the annotations) matches series of the live monitor judging the same rule file: a metric or label value
    it never exposes would leave a recording rule empty and its alert silent however bad the figure got."""
    wait_until("the first scrape", lambda: value(stack, 'up{job="toolwatch"}') == 1.0, 20, stack)
    text = (DEPLOY / "prometheus" / "toolwatch-rules.yml").read_text()
    selectors = set(re.findall(r"(?<![:\w])toolwatch_[a-z_]+(?:\{[^}]*\})?", text))
    assert len(selectors) >= 15, sorted(selectors)
    for selector in sorted(selectors):
        query = selector.replace("%q", json.dumps(AGENT))  # the annotation's printf, for the agent alerted on
        assert stack.prometheus.query(query), f"{selector} matches no series"


def _unix(rfc3339: str) -> float:
    """Seconds since the epoch of a time as Prometheus gives it (UTC, to the nanosecond: 2026-01-02T03:04:05.6Z)."""
    whole, _, fraction = rfc3339.removesuffix("Z").partition(".")
    return datetime.fromisoformat(whole).replace(tzinfo=UTC).timestamp() + float(f"0.{fraction or 0}")


def test_burn_rate_page_fires_on_the_sustained_drop(stack: Stack) -> None:
    stack.traffic.good = False  # (already so after the test above)

    def page() -> list[dict[str, Any]]:
        return [
            a
            for a in stack.prometheus.alerts()
            if a["labels"]["alertname"] == "ToolCallAccuracySLO" and a["labels"]["severity"] == "critical"
        ]

    wait_until("the burn-rate page", lambda: any(a["state"] == "firing" for a in page()), 60, stack)
    (fired,) = page()
    assert fired["labels"]["long_window"] == "30s" and float(fired["value"]) > 0.72
    wait_until(
        "the page in Alertmanager",
        lambda: any(a["labels"].get("severity") == "critical" for a in stack.alertmanager.alerts()),
        20,
        stack,
    )
    assert stack.receiver.wait_for(lambda posts: any(p == "/alertmanager/toolwatch-page" for p, _ in posts), 20), (
        stack.receiver.posts
    )


def test_alerts_firing_stat_counts_each_alert_once(stack: Stack) -> None:
    """Prometheus (ALERTS) and toolwatch serve's in-process evaluation fire the same alert: the stat counts it once."""
    stack.traffic.good = False  # (already so after the tests above)
    key = (ALERT, AGENT, "warning")
    wait_until("the alert firing in process", lambda: stack.live.table().get(key) == 1.0, 40, stack)
    stat = next(p for p in json.loads(DASHBOARD.read_text())["panels"] if p["title"] == "Alerts firing")
    expr = _substitute(stat["targets"][0]["expr"])

    def at(query: str, when: float) -> list[dict[str, Any]]:
        params = urllib.parse.urlencode({"query": query, "time": f"{when:.3f}"})
        result: list[dict[str, Any]] = get_json(f"{stack.prometheus.url}/api/v1/query?{params}")["data"]["result"]
        return result

    def firing_in_both(when: float) -> bool:
        in_prometheus = {tuple(s["metric"].get(k) for k in ("alertname", "agent", "severity"))
                         for s in at('ALERTS{alertstate="firing"}', when)}  # fmt: skip
        in_process = {tuple(s["metric"].get(k) for k in ("alertname", "agent", "severity"))
                      for s in at("toolwatch_alert_active == 1", when)}  # fmt: skip
        return key in in_prometheus and key in in_process

    wait_until("the alert firing in Prometheus and scraped in process", lambda: firing_in_both(time.time()), 40, stack)
    when = time.time()
    distinct = {tuple(s["metric"].get(k) for k in ("alertname", "agent", "severity"))
                for query in ('ALERTS{alertstate="firing"}', "toolwatch_alert_active == 1")
                for s in at(query, when)}  # fmt: skip
    (shown,) = at(expr, when)
    assert float(shown["value"][1]) == len(distinct), (shown, sorted(distinct))


def _dashboard_exprs() -> list[tuple[str, str]]:
    doc = json.loads(DASHBOARD.read_text())
    out = []
    for panel in doc["panels"]:
        for target in panel.get("targets", []):
            out.append((f"{panel['title']} / {target['refId']}", target["expr"]))
    return out


def _substitute(expr: str) -> str:
    return (
        expr.replace("$__rate_interval", "10s").replace("$__range", "3m").replace("$agent", ".*").replace("$tool", ".*")
    )


def test_dashboard_queries_run_and_return_data(stack: Stack) -> None:
    send_odd_spans(stack.traffic.endpoint)  # a rejected span and duplicates, for the ingest-health panels
    if stack.traffic.good:  # run alone: inject the drop so failures, confusion and alerts exist
        stack.traffic.good = False
    wait_until("failing rules", lambda: bool(stack.prometheus.query("toolwatch_rule_failures_total")), 30, stack)
    wait_until(
        "rejected and dropped spans",
        lambda: (
            bool(stack.prometheus.query("toolwatch_spans_rejected_total"))
            and bool(stack.prometheus.query("toolwatch_spans_dropped_total"))
        ),
        20,
        stack,
    )
    wait_until(
        "schema violations", lambda: bool(stack.prometheus.query("toolwatch_schema_violations_total")), 20, stack
    )
    # Run alone, no alert has fired yet: the firing-alerts panel has data once one has been pending for its `for:`.
    wait_until("an alert firing", lambda: bool(stack.prometheus.query('ALERTS{alertstate="firing"}')), 60, stack)
    time.sleep(2.5)  # rate() needs two scrapes of a new series
    exprs = _dashboard_exprs()
    assert len(exprs) >= 25
    empty = []
    for where, expr in exprs:
        assert "${datasource}" not in expr
        if not stack.prometheus.query(_substitute(expr)):
            empty.append(where)
    assert not empty, f"dashboard queries without data: {empty}"
    doc = json.loads(DASHBOARD.read_text())
    for var in doc["templating"]["list"]:
        if var["type"] != "query":
            continue
        m = re.fullmatch(r"label_values\((.+), (\w+)\)", var["query"]["query"])
        assert m, var
        params = urllib.parse.urlencode({"match[]": _substitute(m.group(1))})
        values = get_json(f"{stack.prometheus.url}/api/v1/label/{m.group(2)}/values?{params}")["data"]
        assert values, var["name"]
    assert AGENT in get_json(f"{stack.prometheus.url}/api/v1/label/agent/values")["data"]


def test_promtool_check_metrics_on_live_metrics(stack: Stack, tmp_path: Path) -> None:
    with urllib.request.urlopen(stack.server.metrics_url, timeout=5) as response:
        body = response.read()
    assert b"toolwatch_tool_calls_total" in body
    result = promtool("check", "metrics", stdin=body)
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_check_metrics_on_the_toolwatch_serve_command(tmp_path: Path) -> None:
    """The same check on the real `toolwatch serve` process, after a few turns went through it."""
    port, metrics_port = free_port(), free_port()
    exe = Path(sys.executable).with_name("toolwatch")
    log = tmp_path / "serve.log"
    args = [str(exe), "serve", "--rules", str(RULES), "--port", str(port), "--metrics-port", str(metrics_port),
            "--grace", "0.2s", "--no-watch"]  # fmt: skip
    serve = Process(args, log)
    try:
        wait_http(f"http://127.0.0.1:{metrics_port}/readyz", serve.proc, log)
        traffic = Traffic(f"http://127.0.0.1:{port}/v1/traces", rate=50)
        traffic.start()
        time.sleep(1.0)
        traffic.stop()
        deadline = time.monotonic() + 10
        body = b""
        while time.monotonic() < deadline:
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as response:
                body = response.read()
            if b'toolwatch_turns_total{agent="incident-triage",judged="true"}' in body:
                break
            time.sleep(0.2)
        assert b'toolwatch_turns_total{agent="incident-triage",judged="true"}' in body, body[-2000:]
        result = promtool("check", "metrics", stdin=body)
        assert result.returncode == 0, result.stdout + result.stderr
    finally:
        serve.stop()
    assert serve.proc.returncode == 0, log.read_text()[-2000:]  # SIGTERM: graceful stop
