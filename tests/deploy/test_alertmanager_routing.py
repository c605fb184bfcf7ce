"""The shipped alertmanager.yml's routes and inhibition, on a real Alertmanager, with the labels the shipped rules give.

What its comments claim: pages (critical) go to toolwatch-page, warnings to toolwatch-webhook, info alerts to no
receiver; while an objective's burn-rate page fires for an agent, the warning of the same objective and agent is
inhibited; while no replica is up (ToolwatchDown), the warning of each replica down is inhibited; nothing else is.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.binaries import DEPLOY
from tests.deploy.receiver import Receiver
from tests.deploy.stack import Alertmanager

PROMETHEUS = DEPLOY / "prometheus"


def _shipped_labels() -> dict[tuple[str, str], dict[str, str]]:
    """(alertname, severity) -> the labels of that alert in the shipped rule files (as Prometheus sends them)."""
    out = {}
    for name in ("toolwatch-rules.yml", "toolwatch-health.yml"):
        for group in yaml.safe_load((PROMETHEUS / name).read_text())["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    labels = {"alertname": rule["alert"], **rule["labels"]}
                    out[(rule["alert"], labels["severity"])] = labels
    return out


@pytest.fixture
def alertmanager(tmp_path: Path) -> Iterator[tuple[Alertmanager, Receiver]]:
    receiver = Receiver()
    am = Alertmanager(tmp_path, receiver.url)
    try:
        yield am, receiver
    finally:
        am.stop()
        receiver.close()


def _post(am: Alertmanager, alerts: list[dict[str, str]]) -> None:
    now = datetime.now(UTC)
    body = [
        {"labels": labels, "annotations": {"summary": "test"}, "startsAt": now.isoformat(),
         "endsAt": (now + timedelta(minutes=5)).isoformat()}
        for labels in alerts
    ]  # fmt: skip
    request = urllib.request.Request(
        am.url + "/api/v2/alerts", json.dumps(body).encode(), {"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status == 200


def _delivered(receiver: Receiver) -> dict[str, set[tuple[str, str, str | None]]]:
    out: dict[str, set[tuple[str, str, str | None]]] = {}
    for path, body in receiver.posts:
        for a in body["alerts"]:
            out.setdefault(path, set()).add(
                (a["labels"]["alertname"], a["labels"]["severity"], a["labels"].get("agent"))
            )
    return out


def test_routes_and_inhibition_of_the_shipped_alerts(alertmanager: tuple[Alertmanager, Receiver]) -> None:
    am, receiver = alertmanager
    shipped = _shipped_labels()
    page, slow = shipped[("ToolCallAccuracySLO", "critical")], shipped[("ToolCallAccuracySLO", "warning")]
    other_agent = dict(slow, agent="other-agent")  # the same objective's warning for an agent without a page
    threshold = shipped[("ToolCallAccuracyLow", "warning")]  # another alert of the paged agent: not inhibited
    info = shipped[("AuthTelemetryAccuracyLow", "info")]
    down = shipped[("ToolwatchDown", "critical")]
    target_down = shipped[("ToolwatchTargetDown", "warning")]
    _post(am, [page, slow, other_agent, threshold, info, down, target_down])

    expected = {
        "/toolwatch-page": {("ToolCallAccuracySLO", "critical", page["agent"]), ("ToolwatchDown", "critical", None)},
        "/toolwatch-webhook": {
            ("ToolCallAccuracySLO", "warning", "other-agent"),
            ("ToolCallAccuracyLow", "warning", threshold["agent"]),
        },
    }
    assert receiver.wait_for(lambda _: _delivered(receiver) == expected, 15), _delivered(receiver)
    time.sleep(2)  # group_interval 1s in the test: a late delivery of the inhibited or info alert would be seen
    assert _delivered(receiver) == expected

    states: dict[tuple[str, str, str | None], dict[str, Any]] = {
        (a["labels"]["alertname"], a["labels"]["severity"], a["labels"].get("agent")): a["status"]
        for a in json.loads(urllib.request.urlopen(am.url + "/api/v2/alerts", timeout=5).read())
    }
    inhibited = {k for k, s in states.items() if s["inhibitedBy"]}
    assert inhibited == {("ToolCallAccuracySLO", "warning", slow["agent"]), ("ToolwatchTargetDown", "warning", None)}
    assert states[("AuthTelemetryAccuracyLow", "info", info["agent"])]["state"] == "active"  # kept, in the UI


def test_a_replica_down_alone_is_a_warning(alertmanager: tuple[Alertmanager, Receiver]) -> None:
    """Without ToolwatchDown (other replicas up), ToolwatchTargetDown is not inhibited: it goes to the webhook."""
    am, receiver = alertmanager
    _post(am, [_shipped_labels()[("ToolwatchTargetDown", "warning")]])
    expected = {"/toolwatch-webhook": {("ToolwatchTargetDown", "warning", None)}}
    assert receiver.wait_for(lambda _: _delivered(receiver) == expected, 15), _delivered(receiver)
