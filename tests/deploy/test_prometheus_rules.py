"""The shipped Prometheus rules: a fresh render of the shipped rule file and the hand-written health alerts, valid,
unit-tested with promtool, and naming only metrics and label values the monitor exposes."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]
import pytest
import yaml
from click.testing import CliRunner

from monitor.alerts import render
from monitor.cli import main
from monitor.metrics import names
from monitor.metrics._operational import LISTENERS
from monitor.rules import load_rules
from monitor.serve._pipeline import DROP_REASONS, REJECT_REASONS
from tests.deploy.binaries import DEPLOY, ROOT, promtool

RULE_FILE = "rules/incident-triage.yaml"
RENDERED = DEPLOY / "prometheus" / "toolwatch-rules.yml"
HEALTH = DEPLOY / "prometheus" / "toolwatch-health.yml"  # hand-written: alerts on toolwatch itself
SHIPPED = (RENDERED, HEALTH)
TESTS = sorted((DEPLOY / "prometheus" / "tests").glob("*.yml"))


def _loads(test: Path, rule_file: Path) -> bool:
    """Whether the promtool test file `test` evaluates `rule_file`."""
    doc: dict[str, Any] = yaml.safe_load(test.read_text())
    return any((test.parent / f).resolve() == rule_file.resolve() for f in doc["rule_files"])


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


@pytest.mark.parametrize("rule_file", SHIPPED, ids=lambda p: p.name)
def test_promtool_check_rules(rule_file: Path) -> None:
    result = promtool("check", "rules", rule_file)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.mark.parametrize("rule_file", SHIPPED, ids=lambda p: p.name)
def test_every_rule_file_has_promtool_unit_tests(rule_file: Path) -> None:
    assert any(_loads(test, rule_file) for test in TESTS), (
        f"no promtool test under deploy/prometheus/tests loads {rule_file.name}"
    )


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
    groups = [g for path in SHIPPED for g in yaml.safe_load(path.read_text())["groups"]]
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
        if _loads(path, RENDERED):
            assert yaml.safe_load(path.read_text())["group_eval_order"] == groups, path.name


def test_health_alerts_are_a_static_group_with_severity_and_annotations() -> None:
    (group,) = yaml.safe_load(HEALTH.read_text())["groups"]
    assert group["name"] == "toolwatch-health"
    for rule in group["rules"]:
        assert set(rule) == {"alert", "expr", "for", "labels", "annotations"}, rule["alert"]
        assert rule["labels"]["severity"] in ("critical", "warning", "info"), rule["alert"]
        assert set(rule["annotations"]) == {"summary", "description"}, rule["alert"]


# The label values each operational counter can have, from the code that counts them (a rule matching a value the
# monitor never exposes would stay silent however bad things get, and promtool's input series could not tell).
_LABEL_VALUES: dict[str, dict[str, tuple[str, ...]]] = {
    names.SPANS_DROPPED: {"reason": DROP_REASONS},
    names.SPANS_REJECTED: {"reason": REJECT_REASONS},
    names.RULES_RELOADS: {"result": ("success", "failure")},
    names.CONNECTIONS_REFUSED: {"listener": LISTENERS},
    # HTTP 503 (queue full, bodies in flight); gRPC UNAVAILABLE's number
    names.REQUESTS: {"code": ("503", str(grpc.StatusCode.UNAVAILABLE.value[0]))},
}
_SELECTOR = re.compile(r"\b(toolwatch_[a-z_]+)(\{[^}]*\})?")
_MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"')


def test_health_alerts_name_only_exposed_metrics_and_label_values() -> None:
    metrics = {v for k, v in vars(names).items() if k.isupper() and isinstance(v, str) and v.startswith(names.PREFIX)}
    metrics |= {
        m + suffix for m in (names.VERDICT_LAG, names.JUDGE_DURATION) for suffix in ("_bucket", "_count", "_sum")
    }
    seen = set()
    for rule in yaml.safe_load(HEALTH.read_text())["groups"][0]["rules"]:
        for metric, braces in _SELECTOR.findall(rule["expr"]):
            assert metric in metrics, f"{rule['alert']}: {metric} is not a toolwatch metric"
            seen.add(metric)
            for label, op, value in _MATCHER.findall(braces):
                known = _LABEL_VALUES.get(metric, {})
                assert label in known, f"{rule['alert']}: {metric} has no label {label} to match on"
                wanted = value.split("|") if op == "=~" else [value]
                assert set(wanted) <= set(known[label]), f"{rule['alert']}: {metric}{{{label}}} is never {wanted}"
    # ToolwatchSpansDropped: every reason but exporter retries' copies (harmless), spans refused with 503 /
    # UNAVAILABLE (retried: ToolwatchBackPressure) and judge errors (ToolwatchJudgeErrors)
    dropped = re.search(r'spans_dropped_total\{reason=~"([^"]+)"', HEALTH.read_text())
    elsewhere = {"duplicate", "queue_full", "judge_error"}
    assert dropped and set(dropped.group(1).split("|")) == set(DROP_REASONS) - elsewhere
    assert {names.SPANS_DROPPED, names.SPANS_REJECTED, names.TURNS_EVICTED, names.RULES_LAST_RELOAD_SUCCESSFUL,
            names.REQUESTS, names.CONNECTIONS_REFUSED, names.VERDICT_LAG + "_bucket"} <= seen  # fmt: skip
