from monitor.otlp._span import Span, SpanEvent

def init(span_type: type[Span], event_type: type[SpanEvent], /) -> None:
    """Register the record classes the decoder builds (called once by monitor.otlp._accel)."""

def parse(body: bytes | bytearray | memoryview | str, /) -> tuple[list[Span], int, int] | None:
    """Decode one ExportTraceServiceRequest in OTLP JSON: (usable spans, rejected for bad ids, rejected as
    malformed).

    None when the body is anything but a well-formed request of the usual shapes (invalid JSON, duplicate
    keys, values of unexpected types, other text encodings, ...): the caller then decodes it with the
    reference decoder, which gives the result or the error. A result returned here always equals the
    reference decoder's.
    """
