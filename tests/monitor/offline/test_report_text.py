"""Text from the run in every report form: shown as written (no rich markup, no Markdown or HTML from it),
and text that UTF-8 cannot encode (a lone surrogate, valid in JSON) written escaped instead of crashing."""

from __future__ import annotations

import html as htmllib
import io
import json
import logging
import re
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from monitor.judge import Judge
from monitor.report import (
    Report,
    ReportBuilder,
    ReportOptions,
    Table,
    ToolStats,
    emit_report,
    render_html,
    render_junit,
    render_markdown,
    render_terminal,
)
from tests.monitor.offline.conftest import call, turn

SYSLOG = "where is order 4 see [/var/log/syslog] disk full"
RED = "where is order 6 [error] disk [red]full"
HTMLISH = "where is order 3 <b>x</b> | *a* `c` [l](u) ~~s~~ $m$ &copy;"
ZAP = "zap\ud800"  # a lone surrogate: valid in JSON (\ud800), not encodable in UTF-8


def _hostile(judge: Judge) -> Report:
    """A report of real verdicts whose inputs, tool names and case ids look like markup."""
    b = ReportBuilder(worst=10)
    b.add(judge.judge(turn(SYSLOG, call("get_shipping_eta", {"order_id": "4"}), trace=1)), case_id="[bold]c1[/]")
    b.add(judge.judge(turn(RED, call(ZAP, {"order_id": "6"}), trace=2)), case_id="c2 [/]")
    b.add(judge.judge(turn(HTMLISH, call("get_order_status", {"order_id": "3"}, 1), call("[x]", None, 2), trace=3)))
    for i in range(1, 4):
        b.record_point("[red]accuracy", i, i / 4)
    report = b.build(
        "eval",
        "run of [bold]cases.yaml",
        tables=[Table("[i]Clusters[/i]", ["[u]kind", "input"], [["[/x]", SYSLOG], [ZAP, "a|b"]])],
        notes=["[dim]note[/dim] :smile:"],
    )
    # Tool names are catalog names (no markup in the shipped rules); put one in as a catalog could.
    tool = "[magenta]lookup"
    report.confusion.append((tool, "(none)", 1))
    report.per_tool.append(ToolStats(tool, 0, 1, 0, None, 0.0, None))
    return report


@pytest.fixture
def hostile(support_judge: Judge) -> Report:
    return _hostile(support_judge)


def test_terminal_shows_markup_in_inputs_names_and_ids_literally(hostile: Report) -> None:
    out = io.StringIO()
    render_terminal(hostile, out, width=400)
    text = out.getvalue()
    for literal in (
        SYSLOG,
        RED,
        "[bold]c1[/]",
        "c2 [/]",
        "[i]Clusters[/i]",
        "[u]kind",
        "[/x]",
        "[dim]note[/dim] :smile:",
        "[magenta]lookup",
        "run of [bold]cases.yaml",
        "[red]accuracy",
        "[x] -> hallucinated",
    ):
        assert literal in text, literal
    assert "zap\\ud800" in text  # the surrogate escaped, so the text can be written anywhere
    assert text.rstrip().splitlines()[-1] == hostile.accuracy_line


ESCAPES = "where is order 6 \x1b[2J\x1b]0;owned\x07 \x9b31m \x00\x7f\x08\r"  # clear screen, set title, C1 CSI...


def test_terminal_shows_control_characters_from_the_run_as_escapes_never_raw(support_judge: Judge) -> None:
    """A model's made-up tool name, an input or an agent's error can hold terminal control sequences (clear the
    screen, set the window title, recolour what follows): the summary shows them as `\\x1b` escapes, so what
    reaches the terminal is the report, not instructions to it. Line breaks and tabs stay as they are."""
    out = io.StringIO()
    render_terminal(escapes_report(support_judge), out, width=400)
    text = out.getvalue()
    assert _raw_controls(text, allowed="\n") == []
    for shown in ESCAPES_SHOWN + ("\\x1b[31mlookup -> hallucinated",):
        assert shown in text, shown


def escapes_report(judge: Judge) -> Report:
    """A report whose input, made-up tool name, case id, title, table and note hold control characters."""
    b = ReportBuilder(worst=10)
    b.add(judge.judge(turn(ESCAPES, call("\x1b[31mlookup", {"order_id": "6"}), trace=1)), case_id="c\x1b[1m1")
    return b.build("eval", "run \x1b]8;;x\x1b\\", tables=[Table("t", ["a"], [["x\x1b[0m\ty\nz"]])],
                   notes=["agent raised ValueError: \x1b[41mboom\x00"])


# how the terminal shows the control characters of `escapes_report`; every form shows them so
ESCAPES_SHOWN = ("\\x1b[31mlookup", "c\\x1b[1m1", "\\x1b[2J\\x1b]0;owned\\x07 \\x9b31m", "\\x00\\x7f\\x08\\x0d",
                 "run \\x1b]8;;x\\x1b\\", "\\x1b[41mboom\\x00", "x\\x1b[0m")


def _raw_controls(text: str, allowed: str = "\n\t") -> list[str]:
    return sorted({c for c in text if (ord(c) < 0x20 and c not in allowed) or 0x7F <= ord(c) <= 0x9F})


class _Text(HTMLParser):
    """The text of an HTML document as a browser shows it (character references resolved), scripts left out."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._skip += tag in ("script", "style")
        self.parts += [v for _, v in attrs if v]

    def handle_endtag(self, tag: str) -> None:
        self._skip -= tag in ("script", "style")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def _html_text(html: str) -> str:
    parser = _Text()
    parser.feed(html)
    parser.close()
    return "\n".join(parser.parts)


@pytest.mark.parametrize("form", ["markdown", "html"])
def test_markdown_and_html_show_control_characters_as_the_terminal_does(support_judge: Judge, form: str) -> None:
    """Control characters from the run are no raw bytes in a Markdown or HTML report (HTML forbids most, a viewer
    may act on ESC sequences): they show as the terminal shows them, `\\x1b` escapes."""
    report = escapes_report(support_judge)
    doc = render_markdown(report) if form == "markdown" else render_html(report)
    assert _raw_controls(doc) == []
    text = _html_text(_render_md(doc) if form == "markdown" else doc)
    assert _raw_controls(text) == []
    for shown in ESCAPES_SHOWN:
        assert shown in text, shown


def _md_table_cells(html: str, table_index: int) -> list[list[str]]:
    table = re.findall(r"<table>(.*?)</table>", html, re.S)[table_index]
    rows = re.findall(r"<tr>(.*?)</tr>", table, re.S)
    return [[htmllib.unescape(c) for c in re.findall(r"<t[hd]>(.*?)</t[hd]>", r, re.S)] for r in rows]


def _render_md(markdown: str) -> str:
    # CommonMark with raw HTML on (as GitHub), plus GFM tables and strikethrough.
    return str(MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(markdown))


def test_markdown_cells_show_inputs_as_written(hostile: Report) -> None:
    md = render_markdown(hostile)
    html = _render_md(md)
    assert "<b>" not in html and "<em>" not in html and "<code>" not in html and "<a " not in html
    assert "<s>" not in html
    worst = _md_table_cells(html, -1)
    assert worst[0] == ["turn", "input", "calls", "missed", "reason"]
    assert all(len(row) == 5 for row in worst)  # a `|` in an input does not add a cell
    assert HTMLISH in [row[1] for row in worst] and SYSLOG in [row[1] for row in worst]
    assert "[bold]c1[/]" in [row[0] for row in worst]
    assert "<h2>[i]Clusters[/i]</h2>" in html
    assert [["[u]kind", "input"], ["[/x]", SYSLOG], [ZAP, "a|b"]] == _md_table_cells(html, -2)


@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1).map(str.strip))
def test_any_ascii_cell_renders_as_its_text(text: str) -> None:
    report = Report("eval", "t", "acc", {}, {}, [], [], [], [], tables=[Table("t", ["cell"], [[text]])])
    cells = _md_table_cells(_render_md(render_markdown(report)), -1)
    assert cells == [["cell"], [text]]


@pytest.mark.parametrize("note", ["+ plus", "- minus", "1) one", "2. two", "---", "- - -", "-", "-5 degrees"])
def test_a_markdown_note_starting_like_a_list_or_a_rule_is_shown_as_written(note: str) -> None:
    report = Report("eval", "t", "acc", {}, {}, [], [], [], [], notes=[note, "after"])
    html = _render_md(render_markdown(report))
    assert re.findall(r"<ul>\n(.*?)</ul>", html, re.S) == [
        f"<li>{htmllib.escape(note, quote=False)}</li>\n<li>after</li>\n"
    ], html


@given(
    st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E))
    .map(lambda t: " ".join(t.split()))
    .filter(bool)
)
def test_any_ascii_note_renders_as_one_list_item_of_its_text(text: str) -> None:
    report = Report("eval", "t", "acc", {}, {}, [], [], [], [], notes=[text])
    items = re.findall(r"<li>(.*?)</li>", _render_md(render_markdown(report)), re.S)
    assert [htmllib.unescape(i) for i in items] == [text]


def _strict_stream() -> io.TextIOWrapper:
    """A stream like a real UTF-8 stdout: encoding errors raise."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")


def _written(stream: io.TextIOWrapper) -> str:
    stream.flush()
    raw = stream.buffer
    assert isinstance(raw, io.BytesIO)
    return raw.getvalue().decode("utf-8")


def test_lone_surrogate_is_written_escaped_in_every_form(
    hostile: Report, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stdout = _strict_stream()
    monkeypatch.setattr(sys, "stdout", stdout)
    paths = {k: str(tmp_path / f"r.{k}") for k in ("json", "md", "xml", "html")}
    options = ReportOptions(
        json_path=paths["json"], markdown_path=paths["md"], junit_path=paths["xml"], html_path=paths["html"]
    )
    assert emit_report(hostile, options) == 0
    terminal = _written(stdout)
    assert "zap\\ud800" in terminal and terminal.rstrip().endswith(hostile.accuracy_line)
    for key in ("md", "xml", "html"):
        assert "zap\\ud800" in Path(paths[key]).read_text(encoding="utf-8"), key
    data = json.loads(Path(paths["json"]).read_text(encoding="utf-8"))
    assert [ZAP, "a|b"] in data["tables"][0]["rows"]  # JSON keeps the text itself, as a \ud800 escape
    root = ET.parse(paths["xml"]).getroot()
    assert any("zap\\ud800" in (f.get("message") or "") for f in root.iter("failure"))


@pytest.mark.parametrize("form", ["json_path", "markdown_path", "junit_path", "html_path"])
def test_lone_surrogate_to_stdout_and_quiet(hostile: Report, form: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for quiet in (False, True):
        stdout = _strict_stream()
        monkeypatch.setattr(sys, "stdout", stdout)
        monkeypatch.setattr(sys, "stderr", _strict_stream())
        options = ReportOptions(quiet=quiet)
        setattr(options, form, "-")
        assert emit_report(hostile, options) == 0
        text = _written(stdout)
        assert "zap\\ud800" in text  # JSON: its own \\ud800 escape; the other forms: written escaped


def test_junit_drops_what_xml_cannot_hold() -> None:
    report = Report("eval", "t", "acc", {}, {}, [], [], [], [])
    from monitor.report import CaseResult

    report.cases = [CaseResult("a\x00b\ufffe" + ZAP, "g\x1b", "failed", "m\uffff", "d\x07")]
    root = ET.fromstring(render_junit(report))
    case = root.find("testsuite/testcase")
    assert case is not None and case.get("name") == "ab" + "zap\\ud800" and case.get("classname") == "g"


def test_junit_input_problems_and_gates_drop_what_xml_cannot_hold() -> None:
    from monitor.report import GateResult, InputProblem

    gates = [GateResult("f", "f \x01>= 1%", False, "m\x0b")]
    report = Report("replay", "t", "acc", {}, {}, [], [], [], [], gates=gates)
    xml = render_junit(report, problems=[InputProblem("bad\x00", "first: \x1b[2J" + ZAP, ("a\x07", "b\uffff"))])
    root = ET.fromstring(xml)
    problem, gate = root.iter("testcase")
    error, failure = problem.find("error"), gate.find("failure")
    assert problem.get("name") == "bad" and error is not None and failure is not None
    assert error.get("message") == "first: [2Jzap\\ud800" and error.text == "a\nb"
    assert gate.get("name") == "f >= 1%" and failure.get("message") == "m"


@pytest.mark.parametrize("form", ["markdown", "html"])
def test_gate_text_shows_as_written_in_markdown_and_html(form: str) -> None:
    """The Gates section escapes its text as the rest of the report does: no markup, no table split by a `|`,
    control characters as `\\x1b` escapes."""
    from monitor.report import GateResult

    gate = GateResult("f", "f | <b>x</b> >= 1%", False, "*m* \x1b[2J")
    report = Report("replay", "t", "acc", {}, {}, [], [], [], [], gates=[gate], skipped_comparisons=["- [x] `c`"])
    doc = render_markdown(report) if form == "markdown" else render_html(report)
    assert _raw_controls(doc) == []
    html = _render_md(doc) if form == "markdown" else doc
    assert "<b>" not in html and "<em>" not in html and "<code>" not in html
    section = re.search(r"<h2>Gates</h2>(.*?)(?=<h2>)", html, re.S)
    assert section is not None
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", section[1], re.S)
    cells = [htmllib.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", rows[1], re.S)]
    assert cells == ["f | <b>x</b> >= 1%", "FAILED" if form == "markdown" else "failed", "*m* \\x1b[2J"]
    assert "- [x] `c`" in _html_text(html)


def test_verbose_tracebacks_show_control_characters_as_escapes(caplog: pytest.LogCaptureFixture) -> None:
    """`toolwatch -v eval` prints the agents' tracebacks: an error text or case id holding an ESC sequence is shown
    as `\\x1b`, as in the summary, never acting on the terminal; line breaks and tabs stay."""
    from monitor.cli.eval_cmd import show_tracebacks

    with caplog.at_level(logging.INFO, logger="monitor.cli.eval_cmd"):
        show_tracebacks([("c\x1b[1m1", "ValueError: bad \x1b[2J", "Traceback:\n\tline \x1b]0;owned\x07")], "eval")
    (message,) = [r.getMessage() for r in caplog.records]
    assert "\x1b" not in message and "\x07" not in message
    assert message == "c\\x1b[1m1: ValueError: bad \\x1b[2J\nTraceback:\n\tline \\x1b]0;owned\\x07"


BIDI = "where is order 6 \u202eevil\u202c \u2066x\u2069 \u200f"  # right-to-left override, isolates, RLM


@pytest.mark.parametrize("form", ["terminal", "markdown", "html", "junit"])
def test_bidirectional_controls_from_the_run_are_shown_as_escapes(support_judge: Judge, form: str) -> None:
    """A right-to-left override (U+202E) in an input or a made-up tool name reorders what follows it on screen
    ("Trojan Source"): `lookup\u202egol` reads as another name. Shown as `\\u202e` escapes in every form, as the
    C0/C1 controls are."""
    b = ReportBuilder(worst=10)
    b.add(support_judge.judge(turn(BIDI, call("look\u202epu", {"order_id": "6"}), trace=1)))
    report = b.build("eval", "t")
    if form == "terminal":
        out = io.StringIO()
        render_terminal(report, out, width=400)
        text = out.getvalue()
    else:
        text = {"markdown": render_markdown, "html": render_html, "junit": render_junit}[form](report)
    assert not [c for c in text if c in "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"]
    assert "u202eevil" in text and "u2066x" in text and "look" in text  # escaped, not dropped


def test_a_cut_worst_turn_input_says_it_is_cut(support_judge: Judge) -> None:
    b = ReportBuilder(worst=10)
    b.add(support_judge.judge(turn("where is order 6 " + "x" * 300 + " END", call("nope", {}), trace=1)))
    out = io.StringIO()
    render_terminal(b.build("eval", "t"), out, width=400)
    text = out.getvalue()
    cell = "".join(line.split("│")[2].strip() for line in text.splitlines() if line.count("│") > 3)
    assert "whereisorder6" + "x" * 143 + "…" in cell.replace(" ", "") and " END" not in text, cell


def test_confusion_matrix_names_too_wide_for_the_terminal_stay_whole(support_judge: Judge) -> None:
    """The matrix headed each column by its tool name: too wide for the terminal, rich cut the names to
    `lookup_custom…` alike, and two columns read the same. Then the columns are numbered, each number's whole name
    listed under the table."""
    b = ReportBuilder(worst=0)
    b.add(support_judge.judge(turn("where is order 6", call("get_order_status", {"order_id": "6"}), trace=1)))
    report = b.build("eval", "t")
    names = [f"lookup_customer_account_by_{k}" for k in ("email", "phone", "order", "name", "address")]
    report.confusion += [(n, m, 1 + i) for i, n in enumerate(names) for m in names[i:i + 2]]
    out = io.StringIO()
    render_terminal(report, out, width=100)
    text = out.getvalue()
    section = text.split("Confusion matrix")[1]
    assert "…" not in section
    rows, cols = report.confusion_labels()
    for i, name in enumerate(cols, 1):
        assert re.search(rf"^\s*{i}\s+{re.escape(name)}\s*$", section, re.M), (name, section)
    narrow = io.StringIO()  # a table that fits keeps the names as its headers
    render_terminal(b.build("eval", "t"), narrow, width=100)
    assert re.search(r"expected \\ called\s.*get_order_status", narrow.getvalue())


def test_a_confusion_matrix_too_wide_even_numbered_lists_its_cells(support_judge: Judge) -> None:
    """30 tools at 80 columns: even headed by numbers the matrix did not fit, and rich squeezed every column to
    nothing (a grid of empty cells, not one count shown). Then the non-zero cells are listed, one per line."""
    b = ReportBuilder(worst=0)
    report = b.build("eval", "t")
    names = [f"tool_{k}" for k in range(30)]
    report.confusion += [(n, m, 3 + i) for i, n in enumerate(names) for m in names[i:i + 2]]
    report.confusion.append(("(none)", "(unknown)", 7))
    out = io.StringIO()
    render_terminal(report, out, width=80)
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    section = text.split("Confusion matrix")[1].split("Tool call accuracy")[0]
    for e, a, n in report.confusion:
        assert re.search(rf"^\W*{re.escape(e)}\W+{re.escape(a)}\W+{n}\W*$", section, re.M), (e, a, n, section)
    assert len([line for line in section.splitlines() if re.search(r"\d\W*$", line)]) == len(report.confusion)


def test_the_pass_hat_k_row_names_its_k(support_judge: Judge) -> None:
    """eval --trials 4: the figures table read `pass^k` and left k to a note; every form names it."""
    b = ReportBuilder(worst=0)
    b.add(support_judge.judge(turn("where is order 6", call("get_order_status", {"order_id": "6"}), trace=1)))
    report = b.build("eval", "t")
    report.figures["pass_hat_k"] = 0.5
    report.k = 4
    out = io.StringIO()
    render_terminal(report, out, width=120)
    for text in (out.getvalue(), render_markdown(report), htmllib.unescape(render_html(report))):
        assert "pass^4 (chance that 4 trials of a case all pass)" in text
        assert "pass^k" not in text
