"""OTLP trace decoding: protobuf and JSON export requests, and Collector file-exporter files, to Span records."""

from monitor.otlp._accel import accelerated
from monitor.otlp._encode import request_to_json
from monitor.otlp._file import FileLineError, bounded_lines, read_jsonl
from monitor.otlp._json import REASON_MALFORMED, decode_json, parse_json
from monitor.otlp._protobuf import decode_protobuf, parse_protobuf
from monitor.otlp._span import (
    KIND_CONSUMER,
    KIND_SERVER,
    REASON_BAD_ID,
    STATUS_ERROR,
    STATUS_OK,
    STATUS_UNSET,
    Decoded,
    DecodeError,
    Span,
    SpanEvent,
)

__all__ = [
    "KIND_CONSUMER",
    "KIND_SERVER",
    "REASON_BAD_ID",
    "REASON_MALFORMED",
    "STATUS_ERROR",
    "STATUS_OK",
    "STATUS_UNSET",
    "DecodeError",
    "Decoded",
    "FileLineError",
    "Span",
    "SpanEvent",
    "accelerated",
    "bounded_lines",
    "decode_json",
    "decode_protobuf",
    "parse_json",
    "parse_protobuf",
    "read_jsonl",
    "request_to_json",
]
