"""The shipped Prometheus rules: a fresh render of the shipped rule file, valid, and unit-tested with promtool."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from monitor.alerts import render
from monitor.cli import main
from monitor.rules import load_rules
from tests.deploy.binaries import DEPLOY, ROOT, promtool

RULE_FILE = "rules/incident-triage.yaml"
RENDERED = DEPLOY / "prometheus" / "toolwatch-rules.yml"
TESTS = sorted((DEPLOY / "prometheus" / "tests").glob("*.yml"))


def test_committed_rules_equal_a_fresh_render(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    fresh = render(load_rules([RULE_FILE]), sources=[RULE_FILE])
    assert RENDERED.read_text() == fresh, "run: toolwatch alerts render rules/incident-triage.yaml > " + str(
        RENDERED.relative_to(ROOT)
    )


def test_cli_render_and_check(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(ROOT)
    runner = CliRunner()
    result = runner.invoke(main, ["alerts", "render", RULE_FILE])
    assert result.exit_code == 0, result.output
    assert result.stdout == RENDERED.read_text()
    ok = runner.invoke(main, ["alerts", "render", RULE_FILE, "--check", str(RENDERED)])
    assert ok.exit_code == 0 and "up to date" in ok.output
    stale = tmp_path / "stale.yml"
    stale.write_text(RENDERED.read_text().replace("< 0.9", "< 0.8"))
    bad = runner.invoke(main, ["alerts", "render", RULE_FILE, "--check", str(stale)])
    assert bad.exit_code == 1 and "out of date" in bad.output


def test_cli_render_reports_a_bad_rule_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("catalog:\n  tools: [{name: a}]\nalerts:\n  - name: lower\n    figure: tool_call_accuracy\n")
    result = CliRunner().invoke(main, ["alerts", "render", str(broken)])
    assert result.exit_code == 2  # a bad input file, as in every command (rules check, replay, eval, ...)
    assert "broken.yaml" in result.output and "alerts" in result.output


def test_promtool_check_rules() -> None:
    result = promtool("check", "rules", RENDERED)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_unit_tests_pass() -> None:
    assert TESTS, "no promtool unit tests under deploy/prometheus/tests"
    with ThreadPoolExecutor(len(TESTS)) as pool:  # one promtool per file, side by side
        results = list(pool.map(lambda path: promtool("test", "rules", path), TESTS))
    for path, result in zip(TESTS, results, strict=True):
        assert result.returncode == 0, f"{path.name}:\n{result.stdout}{result.stderr}"
        assert "SUCCESS" in result.stdout, path.name


def _alert_cases() -> dict[str, dict[str, int]]:
    """Per alertname: how many alert_rule_test cases expect it to fire, and how many expect silence."""
    cases: dict[str, dict[str, int]] = {}
    for path in TESTS:
        doc: dict[str, Any] = yaml.safe_load(path.read_text())
        for group in doc["tests"]:
            for case in group.get("alert_rule_test", []):
                counts = cases.setdefault(case["alertname"], {"fires": 0, "silent": 0})
                counts["fires" if case.get("exp_alerts") else "silent"] += 1
    return cases


def test_every_shipped_alert_has_fire_and_silence_tests() -> None:
    groups = yaml.safe_load(RENDERED.read_text())["groups"]
    shipped = {r["alert"] for g in groups for r in g["rules"] if "alert" in r}
    cases = _alert_cases()
    missing = sorted(shipped - set(cases))
    assert not missing, f"alerts without promtool tests: {missing}"
    for name in shipped:
        # fires on a drop; silent at steady state; silent with too few samples (and right after the drop: for:)
        assert cases[name]["fires"] >= 1, name
        assert cases[name]["silent"] >= 2, name


def test_unit_tests_evaluate_every_group_recording_first() -> None:
    groups = [g["name"] for g in yaml.safe_load(RENDERED.read_text())["groups"]]
    assert groups[-1] == "toolwatch-alerts"
    for path in TESTS:
        assert yaml.safe_load(path.read_text())["group_eval_order"] == groups, path.name
