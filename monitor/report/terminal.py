"""The terminal summary: rich tables of the figures, per-tool scores, the confusion matrix, worst turns.

Every text that comes from the run (inputs, reasons, tool and agent names, case ids, titles) is shown as a
rich `Text`, never parsed as markup: `[red]` or `[/var/log/syslog]` in an input prints as written; control
characters in it (an ESC sequence in a made-up tool name or an agent's error) print as `\\x1b` escapes, so they
never act on the terminal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO

from rich.console import Console, Group, JustifyMethod
from rich.table import Table as RichTable
from rich.text import Text

from monitor.report._text import cut, visible
from monitor.report.figures import figure_rows, format_ratio, grade
from monitor.report.model import PER_TOOL_COLUMNS, Report, Table

_STYLE = {"good": "green", "warn": "yellow", "bad": "red", "neutral": ""}
_BLOCKS = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 32


def _lit(text: str, style: str = "") -> Text:
    """Text shown literally: no markup, no emoji codes, lone surrogates and control characters escaped."""
    return Text(visible(text), style=style)


def _table(title: str, *, show_lines: bool = False) -> RichTable:
    return RichTable(title=_lit(title), title_justify="left", show_lines=show_lines)


def _ratio_text(key: str, value: float | None) -> Text:
    if value is None:
        return Text("absent", style="dim")
    return Text(format_ratio(value), style=_STYLE[grade(key, value)])


def _figures_table(report: Report) -> RichTable:
    table = _table("Figures (METRICS.md)")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for key, label, value in figure_rows(report.figures, report.k):
        table.add_row(_lit(label), _ratio_text(key, value))
    return table


def _counts_table(report: Report) -> RichTable:
    table = _table("Counts")
    table.add_column("count")
    table.add_column("value", justify="right")
    for key, value in report.counts.items():
        table.add_row(_lit(key.replace("_", " ")), str(value))
    return table


def _plain_table(extra: Table, justify: Mapping[str, JustifyMethod] | None = None) -> RichTable:
    """A table of text cells, each shown literally."""
    table = _table(extra.title)
    for col in extra.columns:
        table.add_column(_lit(col), overflow="fold", justify=(justify or {}).get(col, "left"))
    for row in extra.rows:
        table.add_row(*(_lit(cell) for cell in row))
    return table


def _per_tool_table(report: Report) -> RichTable:
    right: dict[str, JustifyMethod] = {col: "right" for col in PER_TOOL_COLUMNS if col != "tool"}
    return _plain_table(Table("Per tool", PER_TOOL_COLUMNS, report.per_tool_rows()), right)


CORNER = "expected \\ called"


def _fits(rows: list[str], cols: list[str], counts: list[int], width: int) -> bool:
    """Whether the matrix headed by the whole names fits `width` columns (rich cuts the names that do not:
    `lookup_custom…` for several tools alike)."""
    cell = len(str(max(counts, default=0)))
    first = max([len(visible(r)) for r in rows] + [len(CORNER)])
    return first + sum(max(len(visible(c)), cell) for c in cols) + 3 * (len(cols) + 1) + 1 <= width


def _confusion_cells(report: Report, rows: list[str], cols: list[str]) -> Group:
    """The matrix's non-zero cells, one per line, in the matrix's reading order (the title above the table, which
    is narrower than it)."""
    title = _lit("Confusion matrix (too wide for the terminal: its non-zero cells)", style="italic")
    table = RichTable()
    table.add_column("expected", overflow="fold")
    table.add_column("called", overflow="fold")
    table.add_column("calls", justify="right")
    where = {(e, a): n for e, a, n in report.confusion if n}
    for r in rows:
        for c in cols:
            n = where.get((r, c))
            if n:
                table.add_row(_lit(r), _lit(c), Text(str(n), style="green" if r == c else "red"))
    return Group(title, table)


def _confusion_table(report: Report, width: int) -> RichTable | Group:
    """The matrix, headed by the tool names; where they do not fit `width`, by numbers, each number's name listed
    under it; where the numbers do not fit either (rich squeezed every column to nothing), its non-zero cells as a
    list."""
    rows, cols = report.confusion_labels()
    counts = [n for _, _, n in report.confusion]
    numbered = not _fits(rows, cols, counts, width)
    legend = cols + [r for r in rows if r not in cols]
    number = {name: str(i) for i, name in enumerate(legend, 1)}
    if numbered and not _fits([number[r] for r in rows], [number[c] for c in cols], counts, width):
        return _confusion_cells(report, rows, cols)

    def head(name: str) -> Text:
        return Text(number[name]) if numbered else _lit(name)

    table = _table("Confusion matrix (rows: expected, columns: called)")
    table.add_column(CORNER)
    for c in cols:
        table.add_column(head(c), justify="right")
    for r in rows:
        cells = []
        for c in cols:
            n = report.confusion_cell(r, c)
            cells.append(Text(str(n) if n else "·", style=("green" if r == c else "red") if n else "dim"))
        table.add_row(head(r), *cells)
    if not numbered:
        return table
    keys = RichTable.grid(padding=(0, 2))
    keys.add_column(justify="right")
    keys.add_column()
    for name in legend:
        keys.add_row(number[name], _lit(name))
    return Group(table, keys)


def sparkline(
    points: list[tuple[int, float | None]], low: float = 0.0, high: float = 1.0, width: int = SPARK_WIDTH
) -> str:
    """Values as block characters from ▁ (`low`) to █ (`high`), at most `width` evenly spaced points, the lowest and
    the highest value among them (each in place of the point nearest it: a dip between two points shown went
    unseen while the scale named it); absent = space."""
    if len(points) > width:
        picked = [round(i * (len(points) - 1) / (width - 1)) for i in range(width)]
        present = [i for i, (_, v) in enumerate(points) if v is not None]
        taken: set[int] = set()  # the slots an extreme holds: the other extreme does not take its place
        for extreme in (min(present, key=lambda i: points[i][1] or 0.0),
                        max(present, key=lambda i: points[i][1] or 0.0)) if present and width > 2 else ():
            if extreme in picked:
                taken.add(picked.index(extreme))
                continue
            free = [k for k in range(1, width - 1) if k not in taken]  # the first and the last point stay
            nearest = min(free, key=lambda k: abs(picked[k] - extreme))
            picked[nearest] = extreme
            taken.add(nearest)
        points = [points[i] for i in sorted(picked)]
    top = len(_BLOCKS) - 1
    out = []
    for _, value in points:
        if value is None:
            out.append(" ")
        else:
            level = (value - low) / (high - low) if high > low else 1.0
            out.append(_BLOCKS[min(top, max(0, round(level * top)))])
    return "".join(out)


def _series(report: Report) -> Group | None:
    """Accuracy at a few iterations, one column per series; under it each series' trend as a sparkline."""
    points = report.series_table()
    if points is None:
        return None
    right: dict[str, JustifyMethod] = {col: "right" for col in points.columns}
    names = points.columns[1:]
    values = [v for name in names for _, v in report.series[name] if v is not None]
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    trends = RichTable.grid(padding=(0, 1))
    for _ in range(3):
        trends.add_column()
    for name in names:
        pts = sorted(report.series[name], key=lambda p: p[0])
        span = f"{format_ratio(pts[0][1])} at {pts[0][0]} -> {format_ratio(pts[-1][1])} at {pts[-1][0]}"
        trends.add_row(_lit(name), _lit(sparkline(pts, low, high), style="cyan"), _lit(span, style="dim"))
    scale = Text(f"trend scale: ▁ {format_ratio(low)} .. █ {format_ratio(high)}", style="dim")
    return Group(_plain_table(points, right), trends, scale)


INPUT_SHOWN = 160


def _worst_table(report: Report) -> RichTable:
    table = _table(f"Worst failing turns ({len(report.worst)})", show_lines=True)
    table.add_column("turn", overflow="fold", max_width=20)
    table.add_column("input", overflow="fold", max_width=48)
    table.add_column("calls", overflow="fold")
    table.add_column("reason", overflow="fold")
    for s in report.worst:
        calls = "\n".join(s.calls) or "(no call)"
        if s.missed:
            calls += "\nmissed: " + ", ".join(s.missed)
        table.add_row(_lit(s.ident), _lit(cut(s.input_text, INPUT_SHOWN)), _lit(calls), _lit(s.reason))
    return table


def render_terminal(report: Report, file: IO[str] | None = None, *, width: int | None = None) -> None:
    """Print the summary; the last line is always `Tool call accuracy: a/b (p%)`."""
    console = Console(file=file, width=width, highlight=False, soft_wrap=False)
    if width is None and not console.is_terminal:
        console.width = 120  # logs and CI: wider than rich's 80-column fallback
    console.rule(_lit(report.title, style="bold"))
    if report.interrupted is not None:
        console.print(_lit(report.interrupted.message, style="bold red"))
    console.print(_figures_table(report))
    if report.counts:
        console.print(_counts_table(report))
    if report.per_tool:
        console.print(_per_tool_table(report))
    if report.confusion:
        console.print(_confusion_table(report, console.width))
    series = _series(report)
    if series is not None:
        console.print(series)
    for extra in report.tables:
        console.print(_plain_table(extra))
    if report.worst:
        console.print(_worst_table(report))
    for note in report.notes:
        console.print(_lit(note, style="dim"))
    console.print(_lit(report.accuracy_line, style="bold"))
