"""The Grafana dashboard and its provisioning files (the queries themselves run in test_end_to_end.py)."""

from __future__ import annotations

import json
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
