"""The five telemetry tools of the incident-triage agent (simulated; instrumented with `@tool`)."""

from __future__ import annotations

import hashlib
from typing import Any

from instrumentation import ToolExecutor, tool


def _telemetry(subsystem: str, log_excerpt: str, window_minutes: int) -> dict[str, Any]:
    h = int(hashlib.blake2b(log_excerpt.encode(), digest_size=4).hexdigest(), 16)
    return {
        "subsystem": subsystem,
        "window_minutes": window_minutes,
        "error_rate": round((h % 1000) / 10000, 4),
        "p99_ms": 80 + h % 900,
        "top_error": ("timeout", "5xx", "rate_limited", "validation")[h % 4],
    }


@tool
def pull_auth_telemetry(log_excerpt: str, window_minutes: int = 15) -> dict[str, Any]:
    """Pull recent telemetry of the authentication subsystem."""
    return _telemetry("auth", log_excerpt, window_minutes)


@tool
def pull_billing_telemetry(log_excerpt: str, window_minutes: int = 15) -> dict[str, Any]:
    """Pull recent telemetry of the billing subsystem."""
    return _telemetry("billing", log_excerpt, window_minutes)


@tool
def pull_fulfillment_telemetry(log_excerpt: str, window_minutes: int = 15) -> dict[str, Any]:
    """Pull recent telemetry of the fulfillment subsystem."""
    return _telemetry("fulfillment", log_excerpt, window_minutes)


@tool
def pull_risk_telemetry(log_excerpt: str, window_minutes: int = 15) -> dict[str, Any]:
    """Pull recent telemetry of the risk subsystem."""
    return _telemetry("risk", log_excerpt, window_minutes)


@tool
def pull_support_telemetry(log_excerpt: str, window_minutes: int = 15) -> dict[str, Any]:
    """Pull recent telemetry of the support subsystem."""
    return _telemetry("support", log_excerpt, window_minutes)


TRIAGE_TOOLS = (
    pull_auth_telemetry,
    pull_billing_telemetry,
    pull_fulfillment_telemetry,
    pull_risk_telemetry,
    pull_support_telemetry,
)


def triage_executor() -> ToolExecutor:
    """An executor of the five tools that hands failures back to the model as results (never raises)."""
    return ToolExecutor(TRIAGE_TOOLS, on_error="result")
