"""toolwatch monitor: receives tool-call spans, judges agent turns, publishes metrics.

The names below are imported on first use: `toolwatch` imports this package before anything else, and
`toolwatch serve` must hold SIGHUP as early as it can (see `monitor.cli._startup`); importing them took most of the
time before it could (a SIGHUP then ended the process)."""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # not typing's: importing typing took half of this module's time
if TYPE_CHECKING:
    from typing import Any

    from monitor.records import ToolCall, Turn
    from monitor.verdict import ArgCheckResult, CallVerdict, MissedUnit, Outcome, SchemaViolation, TurnVerdict

_FROM = {
    "ToolCall": "monitor.records",
    "Turn": "monitor.records",
    "ArgCheckResult": "monitor.verdict",
    "CallVerdict": "monitor.verdict",
    "MissedUnit": "monitor.verdict",
    "Outcome": "monitor.verdict",
    "SchemaViolation": "monitor.verdict",
    "TurnVerdict": "monitor.verdict",
}

__all__ = [
    "ArgCheckResult",
    "CallVerdict",
    "MissedUnit",
    "Outcome",
    "SchemaViolation",
    "ToolCall",
    "Turn",
    "TurnVerdict",
]


def __getattr__(name: str) -> Any:
    module = _FROM.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
