"""Alerts from the rule file: Prometheus rule rendering, in-process evaluation, notification."""

from monitor.alerts.figures import FIGURES, Figure
from monitor.alerts.render import DEFAULT_BURN_WINDOWS, BurnWindow, render, render_specs, rule_groups
from monitor.alerts.spec import AlertSpec, AlertSpecError, parse_duration, specs_from_entries, specs_from_ruleset

__all__ = [
    "DEFAULT_BURN_WINDOWS",
    "FIGURES",
    "AlertSpec",
    "AlertSpecError",
    "BurnWindow",
    "Figure",
    "parse_duration",
    "render",
    "render_specs",
    "rule_groups",
    "specs_from_entries",
    "specs_from_ruleset",
]
