"""Prometheus metrics of toolwatch: verdict counters, rolling-window ratios, operational metrics."""

from monitor.metrics import names
from monitor.metrics._batch import VerdictBatch
from monitor.metrics._histogram import Histogram
from monitor.metrics._labels import LabelPolicy
from monitor.metrics._operational import LISTENER_METRICS, LISTENER_RECEIVER
from monitor.metrics._registry import DEFAULT_WINDOWS, ToolwatchMetrics
from monitor.metrics._runtime import served_registry
from monitor.metrics._verdicts import VerdictCounters
from monitor.metrics._windows import DurationTooLong, View, format_duration, parse_duration

__all__ = [
    "DEFAULT_WINDOWS",
    "DurationTooLong",
    "Histogram",
    "LISTENER_METRICS",
    "LISTENER_RECEIVER",
    "LabelPolicy",
    "ToolwatchMetrics",
    "VerdictBatch",
    "VerdictCounters",
    "View",
    "format_duration",
    "names",
    "parse_duration",
    "served_registry",
]
