"""A rich table of the in-process alerts, for the live demo and terminal views."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from monitor.alerts.live import LiveAlerts
from monitor.judge._percent import percent

_STYLE = {"firing": "bold red", "pending": "yellow", "inactive": "green"}
_ORDER = {"firing": 0, "pending": 1, "inactive": 2}


def alerts_table(live: LiveAlerts, max_rows: int = 12) -> Table:
    """One row per alert instance: state, name, agent, severity and the value that triggered it."""
    table = Table(title="Alerts (in-process, from the rule file)", expand=False)
    for column in ("state", "alert", "agent", "severity", "value"):
        table.add_column(column)
    rows = sorted(live.evaluator.states(), key=lambda r: (_ORDER[r[1]], r[0].spec.name, r[0].agent))
    for cond, state, value in rows[:max_rows]:
        name = cond.spec.name + (f" ({cond.burn.long}/{cond.burn.short})" if cond.burn is not None else "")
        shown = percent(value) if value is not None else "-"
        # names come from rule files and agents from spans: shown literally, never read as markup
        table.add_row(Text(state, style=_STYLE[state]), Text(name), Text(cond.agent), Text(cond.severity), shown)
    if not rows:
        table.add_row(Text("ok", style="green"), f"{len(live.specs)} alert rules watching", "-", "-", "-")
    return table
