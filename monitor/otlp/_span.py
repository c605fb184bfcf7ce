"""The decoded span: a small record independent of protobuf and JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SpanAttributes = dict[str, Any]

STATUS_UNSET = 0
STATUS_OK = 1
STATUS_ERROR = 2

# OTLP's span kinds read: a span that starts the work of a request or a message this process received.
KIND_SERVER = 2
KIND_CONSUMER = 5

# Rejection reason of spans whose trace or span id is unusable (a label value of toolwatch_spans_rejected_total).
REASON_BAD_ID = "invalid_id"


@dataclass(slots=True)
class SpanEvent:
    name: str
    time_ns: int
    attributes: SpanAttributes = field(default_factory=dict)


@dataclass(slots=True)
class Span:
    """One OTLP span. Ids are lowercase hex (`parent_span_id` is "" for a root span).

    `resource` is shared by every span of one ResourceSpans block: treat it as read-only.
    """

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: int = 0
    start_ns: int = 0
    end_ns: int = 0
    status_code: int = STATUS_UNSET
    status_message: str = ""
    attributes: SpanAttributes = field(default_factory=dict)
    resource: SpanAttributes = field(default_factory=dict)
    scope: str = ""
    events: list[SpanEvent] | None = None


@dataclass(slots=True)
class Decoded:
    """A decoded export request: the usable spans and the count of spans rejected, by reason."""

    spans: list[Span]
    rejected: dict[str, int] = field(default_factory=dict)

    @property
    def rejected_count(self) -> int:
        return sum(self.rejected.values())

    def reject(self, reason: str, n: int = 1) -> None:
        self.rejected[reason] = self.rejected.get(reason, 0) + n


class DecodeError(ValueError):
    """The body is not a valid OTLP ExportTraceServiceRequest (nothing in it can be used)."""
