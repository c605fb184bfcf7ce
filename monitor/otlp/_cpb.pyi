from monitor.otlp._span import Span, SpanEvent

def init(span_type: type[Span], event_type: type[SpanEvent], /) -> None:
    """Register the record classes the decoder builds (called once by monitor.otlp._accel)."""

def parse(body: bytes | bytearray | memoryview, /) -> tuple[list[Span], int] | None:
    """Decode one serialized ExportTraceServiceRequest: (usable spans, spans rejected for bad ids).

    None when the body is anything but a well-formed request in the common encoding (invalid bytes,
    groups, repeated singular messages to merge, ...): the caller then decodes it with the reference decoder,
    which gives the result or the error. A result returned here always equals the reference decoder's.
    """
