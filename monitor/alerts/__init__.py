"""Alerts from the rule file: Prometheus rule rendering, in-process evaluation, notification."""

from monitor.alerts.evaluate import ActiveAlert, AlertEvaluator
from monitor.alerts.figures import FIGURES, Figure
from monitor.alerts.live import LiveAlerts, for_metrics
from monitor.alerts.notify import AlertMessage, AlertNotifier
from monitor.alerts.render import render, render_specs, rule_groups
from monitor.alerts.spec import AlertSpec, AlertSpecError, parse_duration, specs_from_entries, specs_from_ruleset
from monitor.alerts.view import alerts_table
from monitor.alerts.windows import TallyWindows, read_figure
from monitor.rules import DEFAULT_BURN_WINDOWS, BurnWindow

__all__ = [
    "DEFAULT_BURN_WINDOWS",
    "FIGURES",
    "ActiveAlert",
    "AlertEvaluator",
    "AlertMessage",
    "AlertNotifier",
    "AlertSpec",
    "AlertSpecError",
    "BurnWindow",
    "Figure",
    "LiveAlerts",
    "TallyWindows",
    "alerts_table",
    "for_metrics",
    "parse_duration",
    "read_figure",
    "render",
    "render_specs",
    "rule_groups",
    "specs_from_entries",
    "specs_from_ruleset",
]
