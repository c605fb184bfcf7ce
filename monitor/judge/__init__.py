"""The judge: Turn -> TurnVerdict against oracle rules, and Tally, the aggregates of METRICS.md."""

from monitor.judge._judge import CASE_ID_ATTRIBUTE, Judge
from monitor.judge._tally import FIGURES, Tally, ToolCounts, add_verdict
from monitor.rules import PER_TOOL_FIGURES  # the alertable per-tool figures: one definition, the rules'

__all__ = ["CASE_ID_ATTRIBUTE", "FIGURES", "PER_TOOL_FIGURES", "Judge", "Tally", "ToolCounts", "add_verdict"]
