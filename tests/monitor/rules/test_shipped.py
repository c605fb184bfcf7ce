"""The shipped schema and rule files."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from monitor.rules import PER_TOOL_FIGURES, load_rules, rule_file_schema

RULES = Path(__file__).resolve().parents[3] / "rules"
FILES = sorted(RULES.glob("*.yaml"))


def test_schema_json_is_the_package_copy_and_a_valid_2020_12_schema() -> None:
    shipped = json.loads((RULES / "schema.json").read_text())
    assert shipped == rule_file_schema()
    assert shipped["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(shipped)


def test_additional_properties_false_everywhere() -> None:
    def walk(node: object, path: str) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node:
                assert node.get("additionalProperties") is False, path
            for k, v in node.items():
                walk(v, f"{path}/{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, f"{path}/{i}")

    walk(rule_file_schema(), "#")


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_shipped_rule_file_loads_and_validates(path: Path) -> None:
    jsonschema.validate(yaml.safe_load(path.read_text()), rule_file_schema())
    rs = load_rules([path])
    assert rs.expectations and rs.tools and rs.alerts
    for alert in rs.alerts:
        assert alert.tool is None or alert.figure in PER_TOOL_FIGURES


def test_incident_triage_rules() -> None:
    rs = load_rules([RULES / "incident-triage.yaml"])
    assert rs.agents == frozenset({"incident-triage"})
    assert rs.catalog == {f"pull_{s}_telemetry" for s in ("auth", "billing", "fulfillment", "risk", "support")}
    for tool in rs.tools:
        assert tool.schema is not None and tool.schema["required"] == ["log_excerpt"]
    for exp in rs.expectations:
        ((slot,),) = [alt.slots for alt in exp.alternatives]
        assert (slot.min, slot.max) == (1, 1)
    assert {a.name for a in rs.alerts} >= {"ToolCallAccuracyLow", "ToolCallAccuracySLO"}


def test_all_files_merge() -> None:
    rs = load_rules(FILES)
    assert rs.agents == frozenset({"incident-triage", "customer-support", "travel"})
    assert len({a.name for a in rs.alerts}) == len(rs.alerts)


def test_ruleset_is_deeply_immutable(tmp_path: Path) -> None:
    import dataclasses

    path = tmp_path / "r.yaml"
    path.write_text("catalog: {tools: [{name: t}]}\nexpect:\n  - call: [{tool: t, args: {v: {exact: {k: [1, 2]}}}}]\n")
    rs = load_rules([path, *FILES])
    assert isinstance(hash(rs), int)  # every part is hashable, so nothing in it can change
    check = rs.expectations[0].alternatives[0].slots[0].checks[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        check.expected = {}  # type: ignore[misc]
    with pytest.raises(TypeError):
        check.expected["k"] = 1
    tool = rs.tools[0]
    schema = tool.schema
    assert schema is not None or tool.schema_json is None
