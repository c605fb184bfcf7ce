"""The demo's live terminal view: rolling figures, the confusion matrix, the latest failing turns."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from monitor.demo._logs import TOOL_OF_TAG
from monitor.judge import Tally
from monitor.judge._percent import percent
from monitor.metrics import ToolwatchMetrics
from monitor.metrics._windows import A_CORRECT, A_E2E, A_EXPECTED, A_JUDGED, A_MISSED, A_SELECTION, A_SPURIOUS, A_TURNS
from monitor.report import printable
from monitor.verdict import NONE_LABEL, UNKNOWN_LABEL, TurnVerdict

SHOWN = (
    ("Tool call accuracy", "tool_call_accuracy", A_CORRECT, A_JUDGED),
    ("Spurious-call rate", "spurious_rate", A_SPURIOUS, A_JUDGED),
    ("Missed-call rate", "missed_rate", A_MISSED, A_EXPECTED),
    ("Selection accuracy", "selection_accuracy", A_SELECTION, A_TURNS),
    ("End-to-end accuracy", "end_to_end_accuracy", A_E2E, A_TURNS),
)
EXTRA = (
    ("Hallucinated-tool rate", "hallucinated_rate"),
    ("Schema adherence", "schema_adherence"),
    ("Response compliance", "response_compliance"),
)
_SHORT = {tool: tag for tag, tool in TOOL_OF_TAG.items()}


def pct(x: float | None) -> str:
    return "—" if x is None else percent(x, width=5)


@dataclass(slots=True, frozen=True)
class Failure:
    input_text: str
    reason: str


class VerdictFeed:
    """Collects verdicts from the server thread (the verdict hook) for the view: a Tally and recent failures."""

    def __init__(self, keep: int = 8) -> None:
        self._lock = threading.Lock()
        self.tally = Tally()
        self.failures: deque[Failure] = deque(maxlen=keep)

    def __call__(self, verdicts: Sequence[TurnVerdict]) -> None:
        with self._lock:
            for v in verdicts:
                self.tally.add(v)
                if v.failed:
                    self.failures.append(Failure(v.input_text, v.reason))

    def snapshot(self) -> tuple[Tally, list[Failure]]:
        with self._lock:
            return self.tally.copy(), list(self.failures)


def figures_table(tally: Tally, metrics: ToolwatchMetrics) -> Table:
    windows = metrics.window_counts()
    table = Table(title="Figures", expand=True)
    table.add_column("figure")
    for label in windows:
        table.add_column(f"last {label}", justify="right")
    table.add_column("all turns", justify="right")
    ratios = tally.ratios()
    for name, key, num, den in SHOWN:
        cells = []
        for view in windows.values():
            n = sum(vec[num] for vec in view.agents.values())
            d = sum(vec[den] for vec in view.agents.values())
            cells.append(pct(n / d if d else None))
        table.add_row(name, *cells, pct(ratios[key]))
    for name, key in EXTRA:
        table.add_row(name, *["" for _ in windows], pct(ratios[key]))
    return table


def confusion_table(tally: Tally) -> Table:
    tools = list(TOOL_OF_TAG.values())
    rows = [*tools, NONE_LABEL]
    cols = [*tools, NONE_LABEL, UNKNOWN_LABEL]
    table = Table(title="Confusion matrix (rows: expected, columns: called)", expand=True)
    table.add_column("expected \\ called")
    for c in cols:
        table.add_column(Text(_SHORT.get(c, c)), justify="right")
    for r in rows:
        cells = []
        for c in cols:
            n = tally.confusion.get((r, c), 0)
            style = "green" if r == c and r != NONE_LABEL else ("red" if n else "dim")
            cells.append(Text(str(n), style=style))
        table.add_row(Text(_SHORT.get(r, r)), *cells)
    return table


def failures_table(failures: list[Failure]) -> Table:
    table = Table(title="Latest failing turns", expand=True)
    table.add_column("log line", ratio=3, overflow="ellipsis", no_wrap=True)
    table.add_column("reason", ratio=4, overflow="ellipsis", no_wrap=True)
    for f in reversed(failures):
        table.add_row(Text(printable(f.input_text)), Text(printable(f.reason)))  # literal: inputs are not markup
    return table


def alerts_line(metrics: ToolwatchMetrics) -> Text:
    firing = sorted(f"{name} ({severity})" for (name, _agent, severity), v in metrics.ops.alert_active.items() if v)
    if not firing:
        return Text("alerts firing: none", style="green")
    return Text("alerts firing: " + ", ".join(firing), style="bold red")


def render(header: str, feed: VerdictFeed, metrics: ToolwatchMetrics) -> Group:
    tally, failures = feed.snapshot()
    return Group(
        Panel(Text(header), title="toolwatch demo", border_style="cyan"),
        Text(tally.format_accuracy(), style="bold"),
        alerts_line(metrics),
        figures_table(tally, metrics),
        confusion_table(tally),
        failures_table(failures),
    )
