"""Gates: thresholds under/over, absent figures, regression against a baseline; exit codes of the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from monitor.cli.replay_cmd import replay
from monitor.report import Threshold, check_gates, parse_threshold
from tests.monitor.offline.agents import SUPPORT_INPUTS, support_agent
from tests.monitor.offline.conftest import capture_spans, write_span_files


@pytest.mark.parametrize(
    ("spec", "figure", "value"),
    [
        ("accuracy=0.95", "tool_call_accuracy", 0.95),
        ("schema_adherence=99%", "schema_adherence", 0.99),
        ("E2E=0.5", "end_to_end_accuracy", 0.5),
        ("spurious-rate=0", "spurious_rate", 0.0),
        ("pass^k=0.8", "pass_hat_k", 0.8),
    ],
)
def test_parse_threshold(spec: str, figure: str, value: float) -> None:
    assert parse_threshold(spec) == Threshold(figure, pytest.approx(value))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("spec", "message"),
    [("accuracy", "FIGURE=VALUE"), ("acuracy=0.9", "unknown figure"), ("accuracy=high", "not a number"),
     ("accuracy=1.5", "outside [0, 1]")],
)
def test_parse_threshold_errors(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_threshold(spec)


def test_check_gates() -> None:
    figures = {"tool_call_accuracy": 0.9, "schema_adherence": 1.0, "spurious_rate": 0.08, "sequence_accuracy": None}
    fails = check_gates(figures, fail_under=[Threshold("tool_call_accuracy", 0.95), Threshold("schema_adherence", 0.99),
                                             Threshold("sequence_accuracy", 0.5)],
                        fail_over=[Threshold("spurious_rate", 0.05)])
    assert [f.figure for f in fails] == ["tool_call_accuracy", "sequence_accuracy", "spurious_rate"]
    assert "90.00% < 95.00%" in fails[0].message and "absent" in fails[1].message
    assert check_gates(figures, fail_under=[Threshold("tool_call_accuracy", 0.9)]) == []  # equal passes


def test_baseline_regression_direction() -> None:
    base = {"tool_call_accuracy": 0.95, "spurious_rate": 0.02, "missed_rate": 0.1, "schema_adherence": None}
    now = {"tool_call_accuracy": 0.94, "spurious_rate": 0.05, "missed_rate": 0.0, "schema_adherence": 0.5}
    fails = check_gates(now, baseline=base, max_drop=0.02)
    assert [f.figure for f in fails] == ["spurious_rate"]  # a rate going up is worse; down is better
    assert [f.figure for f in check_gates(now, baseline=base, max_drop=0.0)] == ["tool_call_accuracy", "spurious_rate"]
    assert "was 95.00% in the baseline, now absent" in check_gates({}, baseline=base)[0].message


@pytest.fixture(scope="module")
def span_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_span_files(capture_spans(support_agent, SUPPORT_INPUTS), tmp_path_factory.mktemp("g"))["jsonl"]


def _run(span_file: Path, rules: Path, *extra: str) -> tuple[int, str]:
    res = CliRunner().invoke(replay, [str(span_file), "--rules", str(rules), "--no-progress", "-q", *extra])
    return res.exit_code, res.output


def test_cli_fail_under_lists_failed_figures(span_file: Path, support_rules: Path) -> None:
    code, out = _run(span_file, support_rules, "--fail-under", "accuracy=0.95", "--fail-under",
                     "schema_adherence=0.99", "--fail-under", "selection=0.2")
    assert code == 1
    assert "FAILED 2 gate(s)" in out
    assert "Tool call accuracy (tool_call_accuracy) 55.56% < 95.00%" in out
    assert "Schema adherence (schema_adherence) 87.50% < 99.00%" in out
    assert "selection_accuracy" not in out.split("FAILED")[1]
    code, out = _run(span_file, support_rules, "--fail-under", "accuracy=0.5", "--fail-over", "hallucinated_rate=0.2")
    assert code == 0 and "All gates passed." in out


def test_cli_bad_gate_is_a_usage_error(span_file: Path, support_rules: Path) -> None:
    code, out = _run(span_file, support_rules, "--fail-under", "acc=0.9")
    assert code == 2 and "unknown figure" in out


def test_cli_baseline(span_file: Path, support_rules: Path, tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    code, _ = _run(span_file, support_rules, "--json", str(base))
    assert code == 0
    code, out = _run(span_file, support_rules, "--baseline", str(base))
    assert code == 0 and "All gates passed." in out
    data = json.loads(base.read_text())
    data["figures"]["tool_call_accuracy"] = 0.6  # the baseline was better by 4.4 points
    base.write_text(json.dumps(data))
    code, out = _run(span_file, support_rules, "--baseline", str(base), "--max-drop", "0.02")
    assert code == 1 and "60.00% -> 55.56%" in out
    code, _ = _run(span_file, support_rules, "--baseline", str(base), "--max-drop", "0.05")
    assert code == 0
    base.write_text("{}")
    code, out = _run(span_file, support_rules, "--baseline", str(base))
    assert code == 2 and "not a toolwatch report" in out
