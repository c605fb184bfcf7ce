"""Reports for replay, eval, probe and scenarios: terminal, JSON, Markdown, JUnit, HTML; and CI gates."""

from monitor.report._text import natural_key, printable, visible
from monitor.report.builder import ReportBuilder, per_tool_stats, severity
from monitor.report.figures import FIGURES, canonical_figure, format_ratio
from monitor.report.gates import (
    GateFailure,
    GateResult,
    Threshold,
    failures_of,
    gate_results,
    parse_gate,
    parse_threshold,
    skipped_comparisons,
)
from monitor.report.html import render_html
from monitor.report.junit import render_junit
from monitor.report.markdown import render_markdown
from monitor.report.model import (
    Baseline,
    BaselineError,
    CaseResult,
    InputProblem,
    Interruption,
    Report,
    Sample,
    Table,
    ToolStats,
    load_baseline,
    load_baseline_figures,
)
from monitor.report.output import (
    ReportOptions,
    emit_report,
    emit_then_say,
    pop_report_options,
    report_options,
    with_gates,
)
from monitor.report.terminal import render_terminal

__all__ = [
    "FIGURES",
    "Baseline",
    "BaselineError",
    "CaseResult",
    "GateFailure",
    "GateResult",
    "InputProblem",
    "Interruption",
    "Report",
    "ReportBuilder",
    "ReportOptions",
    "Sample",
    "Table",
    "Threshold",
    "ToolStats",
    "canonical_figure",
    "failures_of",
    "emit_report",
    "emit_then_say",
    "format_ratio",
    "gate_results",
    "load_baseline",
    "load_baseline_figures",
    "natural_key",
    "parse_gate",
    "printable",
    "parse_threshold",
    "per_tool_stats",
    "pop_report_options",
    "render_html",
    "render_junit",
    "render_markdown",
    "render_terminal",
    "report_options",
    "severity",
    "skipped_comparisons",
    "visible",
    "with_gates",
]
