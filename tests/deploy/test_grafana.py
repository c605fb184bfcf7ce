"""The Grafana dashboard and its provisioning files (the queries themselves run in test_end_to_end.py)."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from tests.deploy.binaries import DEPLOY

GRAFANA = DEPLOY / "grafana"
DASHBOARD: dict[str, Any] = json.loads((GRAFANA / "dashboards" / "toolwatch.json").read_text())
DS = {"type": "prometheus", "uid": "${datasource}"}


def test_every_panel_and_target_uses_the_datasource_variable() -> None:
    variables = {v["name"]: v for v in DASHBOARD["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for name in ("agent", "tool"):
        assert variables[name]["datasource"] == DS and variables[name]["includeAll"]
    text = json.dumps(DASHBOARD)
    assert '"uid": "prometheus"' not in text  # no hard-coded data source
    for panel in DASHBOARD["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == DS, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DS, panel["title"]


def test_panels_cover_the_issue_and_fit_the_grid() -> None:
    titles = " | ".join(p["title"].lower() for p in DASHBOARD["panels"])
    for word in ("accuracy", "spurious", "missed", "hallucinated", "schema", "confusion", "failing rules", "spans"):
        assert word in titles, word
    ids = [p["id"] for p in DASHBOARD["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for p in DASHBOARD["panels"]:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, p["title"]
        area = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not area & cells, f"{p['title']} overlaps another panel"
        cells |= area
    for p in DASHBOARD["panels"]:  # process metrics of toolwatch's targets only, not of every exporter scraped
        for target in p.get("targets", []):
            if "process_" in target["expr"]:
                assert "on (instance, job) group_left" in target["expr"] and "toolwatch_build_info" in target["expr"]
    assert "memory" in titles and "cpu" in titles
    confusion = next(p for p in DASHBOARD["panels"] if p["title"].startswith("Confusion matrix (rows"))
    assert "toolwatch_confusion_total" in confusion["targets"][0]["expr"]
    assert confusion["transformations"][0]["id"] == "groupingToMatrix"


def test_provisioning_points_at_the_dashboard_and_prometheus() -> None:
    ds = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "prometheus.yml").read_text())
    (source,) = ds["datasources"]
    assert source["type"] == "prometheus" and source["url"] == "${PROMETHEUS_URL}"
    dash = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "toolwatch.yml").read_text())
    (provider,) = dash["providers"]
    assert provider["type"] == "file"
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())["services"]["grafana"]
    mounts = dict(m.split(":")[:2] for m in compose["volumes"])
    assert mounts["./grafana/dashboards"] == provider["options"]["path"]
    assert mounts["./grafana/provisioning"] == "/etc/grafana/provisioning"
    assert compose["environment"]["PROMETHEUS_URL"] == "http://prometheus:9090"


def _title_quantiles(title: str) -> dict[str, set[str]]:
    """'Judge duration (p99) and verdict lag (p50, p99)' -> {'judge_duration': {'p99'}, 'verdict_lag': {...}};
    in 'A and B (p50, p99)' both get the quantiles."""
    out: dict[str, set[str]] = {}
    waiting: list[str] = []
    for part in re.split(r"\s+and\s+", title):
        m = re.fullmatch(r"(.+?)(?:\s*\((p\d+(?:,\s*p\d+)*)\))?", part.strip())
        assert m is not None, title
        waiting.append(m.group(1).lower().replace(" ", "_"))
        if m.group(2):
            for name in waiting:
                out[name] = set(re.findall(r"p\d+", m.group(2)))
            waiting = []
    return out


def test_quantiles_in_a_title_are_the_ones_queried() -> None:
    checked = 0
    for panel in DASHBOARD["panels"]:
        queried: dict[str, set[str]] = {}
        for target in panel.get("targets", []):
            for q, metric in re.findall(r"histogram_quantile\((0\.\d+),.*?(toolwatch_\w+?)_bucket", target["expr"]):
                queried.setdefault(metric, set()).add(f"p{round(float(q) * 100)}")
        if not queried:
            continue
        named = _title_quantiles(panel["title"])
        for metric, quantiles in queried.items():
            names = [n for n in named if n in metric]
            assert len(names) == 1, f"{panel['title']!r} does not name the quantiles of {metric}"
            assert named[names[0]] == quantiles, f"{panel['title']!r}: {metric} is queried at {sorted(quantiles)}"
            checked += 1
    assert checked >= 2


def test_time_series_points_cover_their_step_not_the_whole_range() -> None:
    """A point of a time series is the value at its time: rate()/increase() over $__range there makes each point the
    total of the dashboard's whole range (3h) before it, so one event shows as a plateau hours long."""
    for panel in DASHBOARD["panels"]:
        if panel["type"] != "timeseries":
            continue
        for target in panel["targets"]:
            windows = re.findall(r"\[([^\]]+)\]", target["expr"])
            assert set(windows) <= {"$__rate_interval"}, (panel["title"], target["expr"])  # gauges: none


def test_table_panels_hide_the_value_column_of_every_query() -> None:
    """A table of several instant queries gets one value field per query, named `Value #<refId>` (a single query's
    is `Value`): an organize step that hides `Value` must hide each of those, or a column of 1s shows per query."""
    checked = 0
    for panel in DASHBOARD["panels"]:
        tables = [t for t in panel.get("targets", []) if t.get("format") == "table"]
        for step in panel.get("transformations", []):
            hidden = step.get("options", {}).get("excludeByName", {})
            if step["id"] != "organize" or not hidden.get("Value") or len(tables) < 2:
                continue
            checked += 1
            names = [f"Value #{t['refId']}" for t in tables]
            assert all(hidden.get(n) for n in names), (panel["title"], names, hidden)
    assert checked, "no table panel of several queries hides its value column"


def test_every_operational_metric_has_a_panel() -> None:
    """What serve publishes about itself (received, rejected, dropped, requests and faults, refused connections,
    ignored attributes, pending turns by kind, pending and queued weight, evictions, lost verdict lines, judge
    duration and lag, reloads) is on the dashboard, not only in the alert rules: an operator sees it before an alert
    fires."""
    from monitor.metrics import names

    first = list(vars(names)).index("SPANS_RECEIVED")
    operational = [v for k, v in list(vars(names).items())[first:] if isinstance(v, str) and v.startswith("toolwatch_")]
    exprs = " ".join(t["expr"] for p in DASHBOARD["panels"] for t in p.get("targets", []))
    shown = {re.sub(r"_(bucket|sum|count)$", "", m) for m in re.findall(r"toolwatch_[a-z_]+", exprs)}
    assert len(operational) >= 18
    assert sorted(set(operational) - shown) == []
    pending = next(p for p in DASHBOARD["panels"] if p["title"].startswith("Pending turns"))
    assert "kind" in pending["targets"][0]["expr"] and "{{kind}}" in pending["targets"][0]["legendFormat"]
