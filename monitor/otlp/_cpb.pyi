from monitor.otlp._span import Span, SpanEvent

def init(span_type: type[Span], event_type: type[SpanEvent], /) -> None:
    """Register the record classes the decoder builds (called once by monitor.otlp._accel)."""

def parse(body: bytes | bytearray | memoryview, /) -> tuple[list[Span], int]:
    """Decode one serialized ExportTraceServiceRequest: (usable spans, spans rejected for bad ids).

    Raises ValueError with a message when the body is not valid protobuf of that message.
    """
