"""The report as GitHub-flavoured Markdown (for a pull-request comment or a job summary)."""

from __future__ import annotations

from monitor.report.figures import figure_rows, format_ratio
from monitor.report.model import PER_TOOL_COLUMNS, Report


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", "<br>")


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out + [""]


def render_markdown(report: Report) -> str:
    lines = [f"# {report.title}", "", f"**{report.accuracy_line}**", "", "## Figures", ""]
    fig_rows = [[label, format_ratio(value)] for _, label, value in figure_rows(report.figures)]
    lines += _table(["figure", "value"], fig_rows)
    if report.counts:
        lines += ["## Counts", ""] + _table(["count", "value"], [[k, str(v)] for k, v in report.counts.items()])
    if report.per_tool:
        lines += ["## Per tool", ""] + _table(PER_TOOL_COLUMNS, report.per_tool_rows())
    if report.confusion:
        row_labels, col_labels = report.confusion_labels()
        rows = [[r] + [str(report.confusion_cell(r, c)) for c in col_labels] for r in row_labels]
        lines += ["## Confusion matrix", "", "Rows: expected tool; columns: called tool.", ""]
        lines += _table(["expected \\ called"] + col_labels, rows)
    for extra in report.tables:
        lines += [f"## {extra.title}", ""] + _table(extra.columns, extra.rows)
    if report.worst:
        rows = [
            [s.ident, s.input_text[:200], "<br>".join(s.calls) or "(no call)", ", ".join(s.missed), s.reason]
            for s in report.worst
        ]
        lines += ["## Worst failing turns", ""] + _table(["turn", "input", "calls", "missed", "reason"], rows)
    lines += [f"- {n}" for n in report.notes]
    return "\n".join(lines).rstrip() + "\n"
