"""Counters of telemetry trouble: what was dropped, failed or replaced, never raised into the agent.

Increments are plain integer additions on one object; under free threading a count may be off by one,
never by the whole. `telemetry_stats()` returns a snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(slots=True)
class TelemetryStats:
    """A snapshot (or the live instance) of the instrumentation's trouble counters."""

    spans_dropped_queue_full: int = 0
    """Spans the batch processor dropped because its queue was full."""
    spans_dropped_queue_bytes: int = 0
    """Spans the batch processor dropped because its queue held its `max_queue_bytes` (the oldest first)."""
    spans_dropped_at_shutdown: int = 0
    """Spans still queued when a shutdown's timeout ended (the monitor down or slow), or ended after the shutdown (a
    later exit hook, a thread still at work): never exported."""
    export_failures: int = 0
    """Export calls that failed or raised."""
    spans_export_failed: int = 0
    """Spans in the failed export calls (lost)."""
    spans_exported: int = 0
    """Spans handed to the exporter in export calls that succeeded."""
    serialization_fallbacks: int = 0
    """Values that were not JSON serializable and were recorded through `repr()` or a marker."""
    redaction_failures: int = 0
    """Calls of a user redaction hook that raised; the content was then left out."""
    instrumentation_errors: int = 0
    """Unexpected errors inside the instrumentation itself (logged, swallowed)."""

    @property
    def dropped_spans(self) -> int:
        """Spans lost on the way out: dropped at a full queue (by count or bytes) or at shutdown, plus those in failed
        exports."""
        return (self.spans_dropped_queue_full + self.spans_dropped_queue_bytes + self.spans_dropped_at_shutdown
                + self.spans_export_failed)

    def snapshot(self) -> TelemetryStats:
        return TelemetryStats(**{f.name: getattr(self, f.name) for f in fields(self)})

    def reset(self) -> None:
        for f in fields(self):
            setattr(self, f.name, 0)


STATS = TelemetryStats()


def telemetry_stats() -> TelemetryStats:
    """A snapshot of the counters (dropped spans, export failures, serialization fallbacks ...)."""
    return STATS.snapshot()


def dropped_spans() -> int:
    """Spans lost so far: dropped because the export queue was full or a shutdown timed out, or in an export that
    failed."""
    return STATS.dropped_spans
