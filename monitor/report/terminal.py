"""The terminal summary: rich tables of the figures, per-tool scores, the confusion matrix, worst turns."""

from __future__ import annotations

from typing import IO

from rich.console import Console
from rich.table import Table as RichTable
from rich.text import Text

from monitor.report.figures import figure_rows, format_ratio, grade
from monitor.report.model import PER_TOOL_COLUMNS, Report

_STYLE = {"good": "green", "warn": "yellow", "bad": "red"}


def _ratio_text(key: str, value: float | None) -> Text:
    if value is None:
        return Text("absent", style="dim")
    return Text(format_ratio(value), style=_STYLE[grade(key, value)])


def _figures_table(report: Report) -> RichTable:
    table = RichTable(title="Figures (METRICS.md)", title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, label, value in figure_rows(report.figures):
        table.add_row(label, _ratio_text(key, value))
    return table


def _counts_table(report: Report) -> RichTable:
    table = RichTable(title="Counts", title_justify="left")
    table.add_column("count")
    table.add_column("value", justify="right")
    for key, value in report.counts.items():
        table.add_row(key.replace("_", " "), str(value))
    return table


def _per_tool_table(report: Report) -> RichTable:
    table = RichTable(title="Per tool", title_justify="left")
    for col in PER_TOOL_COLUMNS:
        table.add_column(col, justify="left" if col == "tool" else "right")
    for row in report.per_tool_rows():
        table.add_row(*row)
    return table


def _confusion_table(report: Report) -> RichTable:
    rows, cols = report.confusion_labels()
    table = RichTable(title="Confusion matrix (rows: expected, columns: called)", title_justify="left")
    table.add_column("expected \\ called")
    for c in cols:
        table.add_column(c, justify="right")
    for r in rows:
        cells = []
        for c in cols:
            n = report.confusion_cell(r, c)
            cells.append(Text(str(n) if n else "·", style=("green" if r == c else "red") if n else "dim"))
        table.add_row(r, *cells)
    return table


def _worst_table(report: Report) -> RichTable:
    table = RichTable(title=f"Worst failing turns ({len(report.worst)})", title_justify="left", show_lines=True)
    table.add_column("turn", overflow="fold", max_width=20)
    table.add_column("input", overflow="fold", max_width=48)
    table.add_column("calls", overflow="fold")
    table.add_column("reason", overflow="fold")
    for s in report.worst:
        calls = "\n".join(s.calls) or "(no call)"
        if s.missed:
            calls += "\nmissed: " + ", ".join(s.missed)
        table.add_row(s.ident, s.input_text[:160], calls, s.reason)
    return table


def render_terminal(report: Report, file: IO[str] | None = None, *, width: int | None = None) -> None:
    """Print the summary; the last line is always `Tool call accuracy: a/b (p%)`."""
    console = Console(file=file, width=width, highlight=False, soft_wrap=False)
    if width is None and not console.is_terminal:
        console.width = 120  # logs and CI: wider than rich's 80-column fallback
    console.rule(Text(report.title, style="bold"))
    console.print(_figures_table(report))
    if report.counts:
        console.print(_counts_table(report))
    if report.per_tool:
        console.print(_per_tool_table(report))
    if report.confusion:
        console.print(_confusion_table(report))
    for extra in report.tables:
        table = RichTable(title=extra.title, title_justify="left")
        for col in extra.columns:
            table.add_column(col, overflow="fold")
        for row in extra.rows:
            table.add_row(*row)
        console.print(table)
    if report.worst:
        console.print(_worst_table(report))
    for note in report.notes:
        console.print(Text(note, style="dim"))
    console.print(Text(report.accuracy_line, style="bold"), markup=False)
