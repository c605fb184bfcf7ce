"""Report forms given hostile names from the run: a tool the agent's spans offer (`from_definitions`) is named by the
trace, so its name can be any text, and reaches every form, the HTML report's inline JSON too."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from monitor.cli.replay_cmd import replay
from monitor.judge import Judge
from monitor.report import Report, ReportBuilder, render_html
from monitor.rules import load_rules
from tests.monitor.offline.agents import support_agent
from tests.monitor.offline.conftest import call, capture_spans, turn, write_span_files
from tests.monitor.offline.test_html_chromium import CHROMIUM, chromium_page

# `<!--<script>` inside a script element's text makes the HTML parser take the element's own `</script>` as text
# (the "double escaped" state): the element runs on to the next script's end tag, and no script of the page runs.
HOSTILE_TOOL = "x<!--<script>"

RULES = """
version: 1
agent: support
catalog:
  from_definitions: true
  tools:
    - name: get_order_status
expect:
  - when: {regex: '(?i)^thanks'}
    none: true
"""


def _offered_tool_report(tmp_path: Path) -> Report:
    """A replay-like report whose confusion matrix holds a tool the turn's spans offered, named HOSTILE_TOOL."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    judge = Judge(load_rules([rules]))
    offered = replace(turn("thanks", call(HOSTILE_TOOL, {}), trace=1),
                      tool_definitions=({"name": HOSTILE_TOOL, "parameters": {"type": "object"}},))
    builder = ReportBuilder()
    verdict = judge.judge(offered)
    assert [c.outcome.value for c in verdict.calls] == ["spurious"]  # a known (offered) tool, not hallucinated
    builder.add(verdict)
    report = builder.build("replay", "offered tools")
    assert ("(none)", HOSTILE_TOOL, 1) in report.confusion
    return report


def _report_data(page: str) -> str:
    m = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S)
    assert m is not None
    return m.group(1)


def test_html_inline_json_has_no_markup_for_the_parser(tmp_path: Path) -> None:
    """The inline JSON holds no `<` (nor `>`, `&`) the HTML parser could read as markup, and still reads back as
    the report's data."""
    report = _offered_tool_report(tmp_path)
    data = _report_data(render_html(report))
    assert not set("<>&") & set(data), data
    assert json.loads(data)["confusion"] == [list(c) for c in report.confusion]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium missing: run scripts/ensure-services.sh")
async def test_html_scripts_run_with_a_hostile_tool_name(tmp_path: Path) -> None:
    """In a browser the page's scripts run (and read the confusion data) whatever the offered tool is named."""
    report = _offered_tool_report(tmp_path)
    html_path = tmp_path / "report.html"
    html_path.write_text(render_html(report), encoding="utf-8")
    async with chromium_page(tmp_path / "profile") as page:
        for domain in ("Runtime", "Page"):
            await page.send(f"{domain}.enable")
        await page.send("Page.navigate", url=html_path.as_uri())
        await page.wait_event("Page.loadEventFired")
        status = await page.evaluate("document.getElementById('js-status').textContent")
        scripts = await page.evaluate("document.scripts.length")
        header = await page.evaluate("document.querySelector('#confusion thead th[data-actual]').dataset.actual")
    assert (status, scripts, header) == ("1 confusion pairs, 1 failing samples shown", 2, HOSTILE_TOOL)


def test_replay_stderr_shows_control_characters_of_a_file_name_as_escapes(support_rules: Path, tmp_path: Path) -> None:
    """A capture file whose name holds an ESC sequence: the error lines on stderr (a terminal, with colour) name it
    as the report forms do, `\\x1b` escaped, so the name does not act on the terminal."""
    source = tmp_path / "spans\x1b[2J\x1b]0;owned\x07.jsonl"
    source.write_text('not json\n{"resourceSpans": []}\n', encoding="utf-8")
    res = CliRunner().invoke(replay, [str(source), "--rules", str(support_rules), "--no-progress", "-q"],
                             color=True)
    assert res.exit_code == 2
    assert "\x1b" not in res.stderr and "\x07" not in res.stderr, res.stderr
    assert "spans\\x1b[2J\\x1b]0;owned\\x07.jsonl: line 1" in res.stderr


def test_replay_quiet_warning_shows_control_characters_of_a_file_name_as_escapes(support_rules: Path,
                                                                                tmp_path: Path) -> None:
    """With -q the records skipped are a `warning:` line on stderr, naming the first one's file: escaped too."""
    batches = capture_spans(support_agent, ["where is order 1"])
    spans = write_span_files(batches, tmp_path / "capture")["jsonl"]
    source = tmp_path / "spans\x1b[2J.jsonl"
    source.write_text("not json\n" + spans.read_text(encoding="utf-8"), encoding="utf-8")
    res = CliRunner().invoke(replay, [str(source), "--rules", str(support_rules), "--no-progress", "-q"], color=True)
    assert res.exit_code == 0, res.output
    assert "\x1b" not in res.stderr, res.stderr
    assert "warning: 1 undecodable record(s) skipped (first: " in res.stderr
    assert "spans\\x1b[2J.jsonl: line 1" in res.stderr


def ansi_generator(rng: object) -> str:
    raise RuntimeError("no more ideas\x1b[2J\x1b]0;pwned\x07")


def test_probe_prints_a_generator_error_with_its_control_characters_escaped() -> None:
    """The generator's exception message reaches the `error:` line: an ESC sequence in it must not act on the
    terminal (clear it, retitle it), as it does not in the report's problems."""
    from monitor.cli.probe_cmd import probe

    res = CliRunner().invoke(probe, [
        "--generator", f"{__name__}:ansi_generator", "--agent", "examples.triage.agent:triage",
        "--rules", str(Path(__file__).resolve().parents[3] / "rules" / "incident-triage.yaml"),
        "--iterations", "2", "--no-progress"], color=True)
    assert res.exit_code == 2, res.output
    line = next(ln for ln in res.output.splitlines() if ln.startswith("error: "))
    assert "\x1b" not in line and "\x07" not in line, line
    assert "no more ideas\\x1b[2J\\x1b]0;pwned\\x07" in line


def test_eval_prints_a_load_error_with_its_control_characters_escaped(tmp_path: Path) -> None:
    """A rule or dataset load error names the user's file and quotes its text: shown on the `error:` line with its
    control characters escaped."""
    from monitor.cli.eval_cmd import eval_ as eval_cmd

    bad = tmp_path / "ru\x1b[2Jles.yaml"
    bad.write_text("version: 1\nagent: [\n")
    res = CliRunner().invoke(eval_cmd, ["--dataset", str(bad), "--agent", "tests.monitor.offline.agents:support_agent",
                                        "--rules", str(bad), "--no-progress"], color=True)
    assert res.exit_code == 2, res.output
    line = next(ln for ln in res.output.splitlines() if ln.startswith("error: "))
    assert "\x1b" not in line, line
    assert "ru\\x1b[2Jles.yaml" in line


def test_replay_prints_a_rule_file_error_with_its_control_characters_escaped(tmp_path: Path) -> None:
    """A rule file error names the file: every command prints it (here replay) with its control characters escaped."""
    bad = tmp_path / "ru\x1b[2Jles.yaml"
    bad.write_text("version: 1\nagent: [\n")
    spans = tmp_path / "spans.jsonl"
    spans.write_text("")
    res = CliRunner().invoke(replay, [str(spans), "--rules", str(bad), "--no-progress"], color=True)
    assert res.exit_code == 2, res.output
    assert "ru\\x1b[2Jles.yaml" in res.output and "\x1b" not in res.output, res.output
