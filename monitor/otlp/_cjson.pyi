from monitor.otlp._span import Span, SpanEvent

def init(span_type: type[Span], event_type: type[SpanEvent], /) -> None:
    """Register the record classes the decoder builds (called once by monitor.otlp._accel)."""

def parse(body: bytes | bytearray | memoryview | str, /) -> tuple[list[Span], int, int]:
    """Decode one ExportTraceServiceRequest in OTLP JSON: (usable spans, rejected for bad ids, rejected as
    malformed).

    Raises ValueError with the whole message ("invalid JSON: ..." or "invalid OTLP JSON: ...") when the body
    is not such a request.
    """
