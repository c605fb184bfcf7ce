"""toolwatch monitor: receives tool-call spans, judges agent turns, publishes metrics."""

from monitor.records import ToolCall, Turn
from monitor.verdict import ArgCheckResult, CallVerdict, MissedUnit, Outcome, SchemaViolation, TurnVerdict

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
