"""The report as GitHub-flavoured Markdown (for a pull-request comment or a job summary).

A run stopped by Ctrl-C says so first, under the title (a partial report; no gates). When gates were asked, a Gates
section comes first after the accuracy line: a verdict (all passed, or how many
failed), a table of every gate with its result and measured value, and the baseline comparisons skipped.

Text from the run is escaped so it shows as written: no raw HTML (`<b>`), no emphasis, code, links, math
or strikethrough from its punctuation, a `|` never splits a table cell, and a note starting `- `, `+ `, `1. ` or
`---` is no list or rule of its own. Line breaks in a cell become `<br>`. Control characters show as `\\x1b`
escapes, as in the terminal summary. Nor is a URL or `www.` text a link, as GitHub's autolink extension makes of
them with no markup at all: it reads the link from the Markdown source, the escapes above in it, and showed
`https://x.y/?a=1&b=2` as `...&amp;b=2`. An e-mail address (`bob@example.com`, `mailto:...`, `xmpp:...`) is still
linked there: GitHub reads it from the text as shown, so it shows as written, a `mailto:` (`xmpp:`) link to itself;
only raw HTML in the Markdown could stop it.
"""

from __future__ import annotations

import re

from monitor.report._text import escape_controls
from monitor.report.figures import figure_rows, format_ratio
from monitor.report.gates import verdict
from monitor.report.model import PER_TOOL_COLUMNS, Report

# Backslash escapes (CommonMark: any ASCII punctuation) and entities for the characters that start markup.
_ESCAPES = str.maketrans(
    {
        "\\": "\\\\",
        "`": "\\`",
        "*": "\\*",
        "[": "\\[",
        "]": "\\]",
        "|": "\\|",
        "~": "\\~",
        "$": "\\$",
        "#": "\\#",
        "<": "&lt;",
        ">": "&gt;",
        "&": "&amp;",
    }
)
# `_` between two letters or digits (get_order_status) cannot start or end emphasis; any other can.
_LOOSE_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")
# What starts a list item or a thematic break at the start of a block (`- `, `+ `, `1. `, `2) `, `---`, `- - -`).
_BLOCK_MARKER = re.compile(r"^([-+])|^(\d{1,9})([.)])")
# What GitHub's autolink extension (cmark-gfm's, and linkify's) takes for the start of a link: the `:` of `://` and
# the `.` of `www.` (cmark-gfm: lower case; others: any). Escaped (`\://`, `www\.`), they start none and show as
# written.
_AUTOLINK = re.compile(r"(?i)(?<=www)\.|:(?=//)")


def escape(text: str) -> str:
    """One line of text as inline Markdown that renders literally (control characters as `\\xNN` escapes)."""
    return _markdown_literal(escape_controls(text))


def _markdown_literal(text: str) -> str:
    """`escape` of a text whose control characters are escaped already."""
    return _AUTOLINK.sub(lambda m: f"\\{m[0]}", _LOOSE_UNDERSCORE.sub(r"\\_", text.translate(_ESCAPES)))


def _one_line(text: str) -> str:
    """The text on one line: its runs of white space (line breaks too) as one space; control characters are
    escaped first, so a CR or a form feed shows as in the terminal rather than as a space."""
    return " ".join(escape_controls(text).split())


def _item(text: str) -> str:
    """One line of text as the content of a list item: inline Markdown whose first character starts no list or
    thematic break of its own."""
    return _BLOCK_MARKER.sub(lambda m: f"\\{m[1]}" if m[1] else f"{m[2]}\\{m[3]}", _markdown_literal(_one_line(text)))


def _cell(text: str) -> str:
    return "<br>".join(_markdown_literal(line) for line in escape_controls(text).splitlines())


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out + [""]


def _heading(level: int, text: str) -> list[str]:
    return ["#" * level + " " + _markdown_literal(_one_line(text)), ""]


def _gates(report: Report) -> list[str]:
    """The Gates section: a verdict line, a row per gate, the baseline comparisons skipped; none when no gate was
    asked."""
    if report.gates is None:
        return []
    lines = _heading(2, "Gates") + [f"**{escape(verdict(report.gates))}**", ""]
    rows = [[g.name, "passed" if g.passed else "FAILED", g.message] for g in report.gates]
    lines += _table(["gate", "result", "value"], rows)
    if report.skipped_comparisons:
        lines += ["Not compared with the baseline:", ""] + [f"- {_item(r)}" for r in report.skipped_comparisons]
        lines += [""]
    return lines


def render_markdown(report: Report) -> str:
    lines = _heading(1, report.title)
    if report.interrupted is not None:  # before the figures, so none is read as a whole run's
        lines += [f"> **{escape(report.interrupted.message)}**", ""]
    lines += [f"**{escape(report.accuracy_line)}**", ""] + _gates(report)
    lines += _heading(2, "Figures")
    fig_rows = [[label, format_ratio(value)] for _, label, value in figure_rows(report.figures, report.k)]
    lines += _table(["figure", "value"], fig_rows)
    if report.counts:
        lines += _heading(2, "Counts") + _table(["count", "value"], [[k, str(v)] for k, v in report.counts.items()])
    if report.per_tool:
        lines += _heading(2, "Per tool") + _table(PER_TOOL_COLUMNS, report.per_tool_rows())
    if report.confusion:
        row_labels, col_labels = report.confusion_labels()
        rows = [[r] + [str(report.confusion_cell(r, c)) for c in col_labels] for r in row_labels]
        lines += _heading(2, "Confusion matrix") + ["Rows: expected tool; columns: called tool.", ""]
        lines += _table(["expected \\ called"] + col_labels, rows)
    series = report.series_table()
    if series is not None:
        lines += _heading(2, series.title) + _table(series.columns, series.rows)
    for extra in report.tables:
        lines += _heading(2, extra.title) + _table(extra.columns, extra.rows)
    if report.worst:
        rows = [
            [s.ident, s.input_text[:200], "\n".join(s.calls) or "(no call)", ", ".join(s.missed), s.reason]
            for s in report.worst
        ]
        lines += _heading(2, "Worst failing turns") + _table(["turn", "input", "calls", "missed", "reason"], rows)
    lines += [f"- {_item(n)}" for n in report.notes]
    return "\n".join(lines).rstrip() + "\n"
