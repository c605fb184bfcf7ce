"""Reports in every format from verdicts of the real judge: figures, confusion, per tool, worst turns."""

from __future__ import annotations

import io
import json
import re
import socket
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from monitor.judge import Tally
from monitor.report import (
    ReportBuilder,
    ReportOptions,
    emit_report,
    load_baseline_figures,
    per_tool_stats,
    render_html,
    render_junit,
    render_markdown,
)
from monitor.report import render_terminal as terminal

ACCURACY = "Tool call accuracy: 5/9 (55.6%)"


def test_terminal_summary_prints_accuracy_line_and_tables(support_builder: ReportBuilder) -> None:
    report = support_builder.build("replay", "support")
    out = io.StringIO()
    terminal(report, out, width=160)
    text = out.getvalue()
    assert report.accuracy_line == support_builder.tally.format_accuracy() == ACCURACY
    assert text.rstrip().splitlines()[-1] == ACCURACY
    assert re.search(r"Tool call accuracy: \d+/\d+ \(\d+\.\d%\)", text)
    for heading in ("Figures (METRICS.md)", "Per tool", "Confusion matrix", "Worst failing turns"):
        assert heading in text
    assert "55.6%" in text and "absent" in text  # sequence accuracy has no ordering constraints here


def test_confusion_and_per_tool_follow_metrics_md(support_builder: ReportBuilder) -> None:
    report = support_builder.build("replay", "support")
    cell = report.confusion_cell
    assert cell("get_order_status", "get_order_status") == 5
    assert cell("get_order_status", "get_shipping_eta") == 1  # substitution
    assert cell("get_order_status", "(unknown)") == 1  # hallucinated, paired with the missing unit
    assert cell("get_order_status", "(none)") == 1  # missed
    assert cell("(none)", "get_order_status") == 1  # repeat past max
    assert cell("(none)", "get_order_history") == 1  # call when none expected
    assert cell("(none)", "(none)") == 1
    rows, cols = report.confusion_labels()
    assert rows[-1] == "(none)" and cols[-2:] == ["(none)", "(unknown)"]
    stats = {t.tool: t for t in report.per_tool}
    status = stats["get_order_status"]
    assert (status.correct, status.column_total, status.row_total) == (5, 6, 8)
    assert status.precision == pytest.approx(5 / 6) and status.recall == pytest.approx(5 / 8)
    assert status.f1 == pytest.approx(2 * (5 / 6) * (5 / 8) / (5 / 6 + 5 / 8))
    assert stats["get_shipping_eta"].precision == 0.0 and stats["get_shipping_eta"].recall is None


def test_worst_turns_are_the_most_severe_failures(support_builder: ReportBuilder) -> None:
    report = support_builder.build("replay", "support")
    assert len(report.worst) == 5
    severities = [s.severity for s in report.worst]
    assert severities == sorted(severities, reverse=True)
    assert all(s.reason for s in report.worst)
    # The hallucinated and wrong-tool turns (bad call + missed unit) outrank a single bad argument.
    top_inputs = {s.input_text for s in report.worst[:3]}
    assert {"where is order 4", "where is order 6"} <= top_inputs


def test_json_round_trip_as_baseline(support_builder: ReportBuilder, tmp_path: object) -> None:
    report = support_builder.build("replay", "support")
    data = json.loads(report.to_json())
    assert data["figures"]["tool_call_accuracy"] == pytest.approx(5 / 9)
    assert data["figures"]["sequence_accuracy"] is None
    assert data["accuracy_line"] == ACCURACY
    assert ["get_order_status", "get_order_status", 5] in data["confusion"]
    path = tmp_path / "r.json"  # type: ignore[operator]
    path.write_text(report.to_json())
    assert load_baseline_figures(path) == report.figures


def test_markdown_has_tables_and_accuracy(support_builder: ReportBuilder) -> None:
    md = render_markdown(support_builder.build("replay", "support"))
    assert f"**{ACCURACY}**" in md
    assert "| get_order_status | 83.3% | 62.5% |" in md
    assert "## Confusion matrix" in md and "## Worst failing turns" in md


def test_junit_has_one_testcase_per_turn(support_builder: ReportBuilder) -> None:
    xml = render_junit(support_builder.build("replay", "support"))
    root = ET.fromstring(xml)
    suite = root.find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    assert len(cases) == 10 == int(suite.get("tests", "0"))
    failed = [c for c in cases if c.find("failure") is not None]
    assert len(failed) == int(suite.get("failures", "-1")) == 7  # turns 1, 2 and 9 pass end to end
    assert all(c.find("failure").get("message") for c in failed)  # type: ignore[union-attr]
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["accuracy"] == ACCURACY


def test_html_is_self_contained(support_builder: ReportBuilder) -> None:
    support_builder.record_point("random accuracy", 10, 0.5)
    html = render_html(support_builder.build("probe", "support <script>"))
    assert "<script>alert" not in html and "support &lt;script&gt;" in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "@import" not in html and "url(" not in html
    assert 'data-expected="get_order_status" data-actual="get_order_status" data-count="5"' in html
    assert 'id="series-chart"' in html and 'id="tool-bars"' in html


def test_series_is_bounded_and_keeps_the_last_point(support_builder: ReportBuilder) -> None:
    b = ReportBuilder()
    for i in range(1, 5001):
        b.record_point("s", i, i / 5000)
    pts = b.series["s"]
    assert len(pts) <= 401 and pts[-1] == (5000, 1.0) and pts[0] == (1, 1 / 5000)


def test_cases_are_bounded() -> None:
    b = ReportBuilder(max_cases=3)
    from monitor.report import CaseResult

    for i in range(5):
        b.add_case(CaseResult(str(i), "g", "passed"))
    assert len(b.cases) == 3 and b.cases_dropped == 2


def test_worst_zero_keeps_no_sample(support_judge: object) -> None:
    from tests.monitor.offline.conftest import support_turns

    b = ReportBuilder(worst=0, keep_cases=False)
    for t in support_turns():
        b.add(support_judge.judge(t))  # type: ignore[attr-defined]
    report = b.build("probe", "x")
    assert report.worst == [] and report.cases == [] and report.counts["judged_calls"] == 9


def test_series_shows_in_terminal_and_markdown(support_builder: ReportBuilder) -> None:
    report = support_builder.build("probe", "support")
    out = io.StringIO()
    terminal(report, out, width=160)
    text = out.getvalue()
    assert "Accuracy as iterations grow" in text
    assert re.search(r"│\s+1 │\s+100\.0% │", text) and re.search(r"│\s+10 │\s+55\.6% │", text)
    assert re.search(r"tool_call_accuracy [▁▂▃▄▅▆▇█]{10} 100\.0% at 1 -> 55\.6% at 10", text)
    md = render_markdown(report)
    assert "## Accuracy as iterations grow\n\n| iteration | tool_call_accuracy |\n|---|---|\n| 1 | 100.0% |" in md
    assert "| 10 | 55.6% |" in md


def test_series_table_picks_a_few_iterations_of_every_series() -> None:
    b = ReportBuilder()
    for i in range(1, 5001):
        b.record_point("art", i, i / 5000)
    b.record_point("random", 10, 0.5)
    b.record_point("random", 4000, None)
    b.record_point("random", 4500, 0.7)
    table = b.build("probe", "x").series_table()
    assert table is not None and table.columns == ["iteration", "art", "random"]
    assert len(table.rows) == 8
    assert table.rows[0] == ["1", "0.1%", ""]  # 1/5000, above 0 (never shown as 0.0%); random has no point yet
    assert table.rows[-1] == ["5000", "100.0%", "70.0%"]  # random's latest value
    assert [int(r[0]) for r in table.rows] == sorted(int(r[0]) for r in table.rows)
    assert ReportBuilder().build("probe", "x").series_table() is None


def test_junit_has_totals_timestamp_hostname_and_failure_types(support_builder: ReportBuilder) -> None:
    from monitor.report import CaseResult

    support_builder.add_case(CaseResult("slow", "support", "error", "timed out after 0.5 s", "input: x", 0.5))
    report = support_builder.build("eval", "support")
    root = ET.fromstring(render_junit(report))
    suite = root.find("testsuite")
    assert suite is not None
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", suite.get("timestamp", ""))
    assert suite.get("hostname") == socket.gethostname()
    totals = {k: root.get(k) for k in ("tests", "failures", "errors", "skipped", "time")}
    assert (
        totals
        == {k: suite.get(k) for k in totals}
        == {"tests": "11", "failures": "7", "errors": "1", "skipped": "0", "time": "0.500"}
    )
    assert {f.get("type") for f in root.iter("failure")} == {"toolwatch.TurnFailed"}
    assert [e.get("type") for e in root.iter("error")] == ["toolwatch.RunError"]
    when = datetime(2024, 5, 1, 12, 30, 15, 999, tzinfo=UTC)
    fixed = ET.fromstring(render_junit(report, timestamp=when, hostname="ci-7")).find("testsuite")
    assert fixed is not None and fixed.get("hostname") == "ci-7"
    assert fixed.get("timestamp") == when.astimezone().replace(tzinfo=None, microsecond=0).isoformat()


def test_tools_and_cases_sort_in_natural_order() -> None:
    from monitor.report import natural_key

    assert sorted(["c10", "c2", "c1", "b", "c1a", "C3"], key=natural_key) == ["C3", "b", "c1", "c1a", "c2", "c10"]
    tally = Tally()
    for tool in ("tool10", "tool2", "tool1"):
        tally.confusion[(tool, tool)] += 1
    tally.confusion[("tool2", "(none)")] += 1
    assert [t.tool for t in per_tool_stats(tally)] == ["tool1", "tool2", "tool10"]
    b = ReportBuilder(tally)
    rows, cols = b.build("eval", "x").confusion_labels()
    assert rows == ["tool1", "tool2", "tool10"] and cols == ["tool1", "tool2", "tool10", "(none)"]


def test_two_reports_to_stdout_is_a_usage_error(support_rules: Path, tmp_path: Path) -> None:
    from monitor.cli.replay_cmd import replay

    src = tmp_path / "none.jsonl"
    src.write_text("", encoding="utf-8")
    res = CliRunner().invoke(replay, [str(src), "--rules", str(support_rules), "--json", "-", "--junit", "-"])
    assert res.exit_code == 2
    assert "--json and --junit both ask for it" in res.stderr and res.stdout == ""
    res = CliRunner().invoke(
        replay,
        [
            str(src),
            "--rules",
            str(support_rules),
            "--json",
            "-",
            "--markdown",
            "-",
            "--html",
            "-",
            "--junit",
            str(tmp_path / "r.xml"),
        ],
    )
    assert res.exit_code == 2 and "--json, --markdown and --html all ask for it" in res.stderr
    with pytest.raises(click.UsageError):  # also for callers that build ReportOptions themselves
        emit_report(ReportBuilder().build("replay", "x"), ReportOptions(json_path="-", html_path="-"))


def test_tool_usage_rate_is_not_coloured_good_or_bad(support_builder: ReportBuilder) -> None:
    """The usage rate has no better direction: its HTML card and terminal value carry no good/warn/bad colour."""
    report = support_builder.build("replay", "support")
    assert report.figures["tool_usage_rate"] is not None
    card = re.search(r'data-figure="tool_usage_rate">.*?<div class="v ([a-z]+)">', render_html(report))
    assert card is not None and card.group(1) == "neutral"
    accuracy = re.search(r'data-figure="tool_call_accuracy">.*?<div class="v ([a-z]+)">', render_html(report))
    assert accuracy is not None and accuracy.group(1) in ("good", "warn", "bad")


@pytest.mark.parametrize("status", ["failed", "error"])
def test_a_case_failed_by_what_the_judge_does_not_see_is_among_the_worst(support_judge: object, status: str) -> None:
    """A scenario step failing only on its tool-call count bounds, or a trial whose run timed out or raised after
    the right calls: the turn's verdict passes, the case fails. It was a failure in the step table and JUnit, but
    missing from the worst failing turns (terminal, JSON, Markdown, HTML)."""
    from tests.monitor.offline.conftest import support_turns

    b = ReportBuilder(worst=10)
    verdicts = [support_judge.judge(t) for t in support_turns()]  # type: ignore[attr-defined]
    good = next(v for v in verdicts if not v.failed)
    b.add(good, case_id="s step 3", status=status, message="3 tool calls, at most 2 allowed")
    b.add(good, case_id="s step 4", status="passed")
    report = b.build("eval", "x")
    (sample,) = report.worst
    assert sample.ident == "s step 3" and sample.reason == "3 tool calls, at most 2 allowed" and sample.severity >= 1
    assert [c.status for c in report.cases] == [status, "passed"]


def test_a_failed_turn_whose_run_raised_has_the_runs_error_as_its_reason(support_judge: object) -> None:
    from tests.monitor.offline.conftest import support_turns

    b = ReportBuilder(worst=10)
    bad = next(v for v in (support_judge.judge(t) for t in support_turns()) if v.failed)  # type: ignore[attr-defined]
    b.add(bad, case_id="run 3", status="error", message=f"timed out after 0.5 s; {bad.reason}")
    (sample,) = b.build("probe", "x").worst
    assert sample.reason == f"timed out after 0.5 s; {bad.reason}"


def test_a_sparkline_of_many_points_shows_the_lowest_and_the_highest() -> None:
    """Thinned to 32 evenly spaced points, the sparkline skipped the dip at run 4 that its scale names as the low
    (`trend scale: ▁ 75.0%` and no ▁ in the line). Both extremes are kept among the points shown."""
    from monitor.report.terminal import sparkline

    points: list[tuple[int, float | None]] = [(i, 1.0 if i != 4 else 0.75) for i in range(1, 61)]
    points[44] = (45, 0.9)
    line = sparkline(points, 0.75, 1.0)
    assert len(line) == 32 and line.count("▁") == 1 and "█" in line and line.index("▁") <= 3
    few: list[tuple[int, float | None]] = [(1, 0.5), (2, 1.0)]
    assert sparkline(few, 0.5, 1.0) == "▁█"
    for low_at in (1, 4, 50):  # a dip next to a spike: the spike took the dip's place
        pts: list[tuple[int, float | None]] = [(i, 0.5) for i in range(100)]
        pts[low_at], pts[low_at + 1] = (low_at, 0.0), (low_at + 1, 1.0)
        line = sparkline(pts, 0.0, 1.0)
        assert line.count("▁") == 1 and line.count("█") == 1 and line.index("▁") < line.index("█"), (low_at, line)
