"""The dashboard's alert panels in a Prometheus that also evaluates other projects' alerts (a shared Prometheus).

kube-prometheus, for one, ships `Watchdog`, an alert that always fires. The "Alerts firing" stat and the "Firing
alerts" table show toolwatch's alerts (the rendered ones, which carry a `figure` label, and the toolwatch-health
ones, all named Toolwatch*), not every alert of the Prometheus they are pointed at.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.binaries import DEPLOY
from tests.deploy.stack import Prometheus, free_port

DASHBOARD = DEPLOY / "grafana" / "dashboards" / "toolwatch.json"
HEALTH = DEPLOY / "prometheus" / "toolwatch-health.yml"
FIRING = {"Watchdog", "ToolwatchDown"}


def _foreign_and_toolwatch_rules(path: Path) -> Path:
    """Another project's always-firing alert beside toolwatch's own ToolwatchDown, held by no `for:`."""
    (health,) = yaml.safe_load(HEALTH.read_text())["groups"]
    down = dict(next(r for r in health["rules"] if r["alert"] == "ToolwatchDown"), **{"for": "0s"})
    watchdog = {"alert": "Watchdog", "expr": "vector(1)", "labels": {"severity": "none"}}
    path.write_text(yaml.safe_dump({"groups": [{"name": "shared", "rules": [watchdog, down]}]}))
    return path


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    work = tmp_path_factory.mktemp("shared-prometheus")
    # Nothing listens at the toolwatch target: no replica is up, so ToolwatchDown fires.
    prom = Prometheus(work, _foreign_and_toolwatch_rules(work / "rules.yml"), f"127.0.0.1:{free_port()}",
                      f"127.0.0.1:{free_port()}")  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while {s["metric"]["alertname"] for s in prom.query('ALERTS{alertstate="firing"}')} != FIRING:
            assert time.monotonic() < deadline, (prom.alerts(), prom.log.read_text()[-2000:])
            time.sleep(0.25)
        yield prom
    finally:
        prom.stop()


def _panel(title: str) -> dict[str, Any]:
    panel: dict[str, Any] = next(p for p in json.loads(DASHBOARD.read_text())["panels"] if p["title"] == title)
    return panel


def _expr(target: dict[str, Any], agent: str) -> str:
    return str(target["expr"]).replace("$agent", agent)


@pytest.mark.parametrize("agent", [".*", "incident-triage"])
def test_alerts_firing_stat_counts_toolwatch_alerts_only(prometheus: Prometheus, agent: str) -> None:
    (target,) = _panel("Alerts firing")["targets"]
    (shown,) = prometheus.query(_expr(target, agent))
    assert float(shown["value"][1]) == 1.0  # ToolwatchDown (whatever the agent chosen), not Watchdog


@pytest.mark.parametrize("agent", [".*", "incident-triage"])
def test_firing_alerts_table_lists_toolwatch_alerts_only(prometheus: Prometheus, agent: str) -> None:
    rows = [row for t in _panel("Firing alerts")["targets"] for row in prometheus.query(_expr(t, agent))]
    assert [row["metric"]["alertname"] for row in rows] == ["ToolwatchDown"]


def test_every_shipped_alert_is_one_the_panels_select() -> None:
    """What the panels rely on: rendered alerts carry `figure`, the health alerts' names start with Toolwatch."""
    rendered = yaml.safe_load((DEPLOY / "prometheus" / "toolwatch-rules.yml").read_text())["groups"]
    alerts = [r for g in rendered for r in g["rules"] if "alert" in r]
    assert alerts and all(r["labels"].get("figure") for r in alerts)
    (health,) = yaml.safe_load(HEALTH.read_text())["groups"]
    assert all(r["alert"].startswith("Toolwatch") and r["alert"] != "Toolwatch" for r in health["rules"])
