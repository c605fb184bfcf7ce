"""A rule file's alert `summary` is plain text, in the rendered Prometheus rules as in the in-process alerts.

Prometheus expands annotations as Go templates: a summary with `{{` rendered as is either fails to load (the whole
rule file refused: every toolwatch recording rule and alert gone) or is expanded, unlike the in-process alert, which
sends the text as written. Checked with the real promtool: `check rules`, and a unit test of the fired alert.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from monitor.alerts import render
from monitor.rules import load_rules
from tests.deploy.binaries import ROOT, promtool

SUMMARIES = ["Accuracy of {{tool}} is low", "Below 90% for {{ $labels.agent }} ({{ $value }})", "see {{{x}}} {{"]


def _rule_file(tmp_path: Path, summary: str) -> Path:
    doc = yaml.safe_load((ROOT / "rules" / "incident-triage.yaml").read_text())
    doc["alerts"] = [{"name": "AccuracyLow", "figure": "tool_call_accuracy", "agent": "incident-triage",
                      "below": 0.9, "window": "5m", "for": "1m", "min_samples": 5, "summary": summary}]  # fmt: skip
    path = tmp_path / "summary.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.mark.parametrize("summary", SUMMARIES)
def test_a_summary_with_braces_is_shown_as_written(tmp_path: Path, summary: str) -> None:
    rules = tmp_path / "rules.yml"
    rules.write_text(render(load_rules([_rule_file(tmp_path, summary)])))
    checked = promtool("check", "rules", rules)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    series = 'toolwatch_{}_total{{agent="incident-triage",tool="pull_auth_telemetry"{}}}'
    # 10 judged calls a minute, none correct: the alert fires. Its summary as Prometheus expands it is read off the
    # unit test's report of a deliberately empty expectation.
    test: dict[str, Any] = {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": [
                {"series": series.format("judged_calls", ""), "values": "0+10x10"},
                {"series": series.format("tool_calls", ',outcome="wrong_tool"'), "values": "0+10x10"},
            ],
            "alert_rule_test": [{"eval_time": "8m", "alertname": "AccuracyLow", "exp_alerts": []}],
        }],
    }  # fmt: skip
    spec = tmp_path / "test.yml"
    spec.write_text(yaml.safe_dump(test, sort_keys=False))
    result = promtool("test", "rules", spec)
    report = (result.stdout + result.stderr).replace('\\"', '"')
    assert result.returncode == 1 and "AccuracyLow" in report, report  # it fired, with these annotations:
    assert f'summary="{summary}"' in report, report
